"""The host driver of an emitted accelerator (``accelgen_axi_top``): load a layer's tensors,
configure, start, wait for ``done`` and read the outputs back, over AXI4-Lite (and the AXI4-Stream
ports where the host has a DMA).

The driver is written once, without I/O: :func:`program` yields bus operations (:class:`Write`,
:class:`Read`, :class:`Stream`, :class:`Receive`) and receives what reads return.  A transport runs
them: :class:`Device` with a blocking transport (:class:`MmioTransport` over ``/dev/mem`` or a UIO
device, :class:`CallableTransport` around any ``read(addr)`` / ``write(addr, value)``), and the
cocotb bench (``sim_tests/tb_accel.py``) with ``cocotbext-axi``'s masters.  Every address comes
from the register map (:mod:`hwgen.regmap`, SystemRDL).

::

    from hwgen.host import Design, Device, MmioTransport
    design = Design.load("out/kcp_tiny")                       # the folder `accelgen emit` wrote
    dev = Device(design, MmioTransport(0x43C00000))
    out, cycles = dev.run("conv2d:K=8,C=4,Y=6,X=6,R=3,S=3", x, w)  # x[C,Y,X], w[K,C,R,S] int8
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from costmodel.base import AccelgenError
from costmodel.dataflow.spec import dataflow_from_spec, resolve_dataflow
from costmodel.hardware import Hardware, hardware_from_dict
from costmodel.hwgen_preset.closed import hwgen_cycles
from costmodel.hwgen_preset.structure import HwStructure, tiles_of
from costmodel.workload import Layer, parse_layer_spec

from .geometry import CONFIG_REGS
from .layout import Job, make_job
from .regmap import MAGIC, REGION_CODES, RegisterMap, register_map

__all__ = ["AccelgenError", "Write", "Read", "Stream", "Receive", "Op", "program", "Design", "Transport", "Device",
           "MmioTransport", "CallableTransport", "structure_from_dict", "int8_bytes"]


@dataclass(frozen=True)
class Write:
    address: int          # byte address on s_axil
    value: int
    strobe: int = 0xF


@dataclass(frozen=True)
class Read:
    address: int          # the program receives the 32-bit word


@dataclass(frozen=True)
class Stream:
    data: bytes           # s_axis beats of 4 bytes (tkeep for a short last beat), tlast on the last


@dataclass(frozen=True)
class Receive:
    words: int            # m_axis words; the program receives them as unsigned 32-bit ints


Op = Write | Read | Stream | Receive


def int8_bytes(words: list[int]) -> bytes:
    return bytes(v & 0xFF for v in words)


def _signed(word: int) -> int:
    return word - (1 << 32) if word & (1 << 31) else word


def program(job: Job, streams: bool = False, regs: RegisterMap | None = None,
            poll_limit: int = 1 << 24) -> Generator[Op, int | list[int] | None, tuple[list[int], int]]:
    """Run one layer: configure, load the input and weight L2, clear the outputs, start, poll
    ``status.done``, read the ``cycles`` register and the outputs.  With ``streams`` the tensors
    go over ``s_axis`` and come back over ``m_axis``; otherwise through ``load_data`` /
    ``read_data``.  Returns ``(outputs as int32, cycles)``."""
    r = regs or register_map()
    a = r.address
    status = r["status"]
    for name in CONFIG_REGS:
        yield Write(a(f"cfg_{name}"), job.config[name])
    for region, words in (("input", job.input_words), ("weight", job.weight_words)):
        yield Write(a("region"), r["region"].value(target=REGION_CODES[region]))
        yield Write(a("offset"), 0)
        data = int8_bytes(words)
        if streams:
            yield Stream(data)
        else:
            for i in range(0, len(data), 4):
                chunk = data[i:i + 4]
                yield Write(a("load_data"), int.from_bytes(chunk.ljust(4, b"\0"), "little"), (1 << len(chunk)) - 1)
    yield Write(a("out_words"), job.output_words)
    yield Write(a("ctrl"), r["ctrl"].value(clear=1))
    for _ in range(poll_limit):
        if not status.get((yield Read(a("status"))), "clearing"):
            break
    yield Write(a("irq_status"), r["irq_status"].value(done=1))
    yield Write(a("ctrl"), r["ctrl"].value(start=1))
    for _ in range(poll_limit):
        if status.get((yield Read(a("status"))), "done"):
            break
    else:
        raise AccelgenError(f"done did not rise within {poll_limit} status reads", where="accelgen_axi_top")
    cycles = yield Read(a("cycles"))
    if streams:
        yield Write(a("ctrl"), r["ctrl"].value(readout=1))
        words = yield Receive(job.output_words)
    else:
        yield Write(a("region"), r["region"].value(target=REGION_CODES["output"]))
        yield Write(a("offset"), 0)
        words = []
        for _ in range(job.output_words):
            words.append((yield Read(a("read_data"))))
    return [_signed(w) for w in words], cycles


def structure_from_dict(d: dict) -> HwStructure:
    """The structure an emitted manifest records (``manifest["structure"]``)."""
    loops = tuple((int(item.split(":")[0][1:]), item.split(":")[1]) for item in d["loops"])
    return HwStructure(int(d["num_pes"]), int(d["clusters"]), int(d["pes_per_cluster"]), tuple(d["spatial"]),
                       loops, int(d["noc_words_per_cycle"]), dict(d["pe_tile_max"]), int(d["max_stride"]),
                       int(d.get("simd_lanes", 1)), bool(d.get("slide_x", False)),
                       bool(d.get("slide_y", False)), int(d.get("drain_words", 0)))


@dataclass(frozen=True)
class Design:
    """An emitted design, as its ``manifest.json`` describes it."""

    structure: HwStructure
    l2_words: dict[str, int]
    hardware: Hardware
    dataflow: str                 # the spec `emit` was given (a library name, a file, directives)
    name: str = "design"

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> "Design":
        path = Path(folder) / "manifest.json"
        try:
            m = json.loads(path.read_text())
            return cls(structure_from_dict(m["structure"]), {k: int(v) for k, v in m["l2_words"].items()},
                       hardware_from_dict(m["hardware"], where=str(path)), m.get("dataflow_spec") or m["dataflow"],
                       m["design"])
        except FileNotFoundError:
            raise AccelgenError("no manifest.json here; give the folder `accelgen emit` wrote", where=str(folder)) from None
        except (KeyError, ValueError, TypeError) as err:
            if isinstance(err, AccelgenError):
                raise
            raise AccelgenError(f"not an accelgen manifest ({err!r} missing or malformed)", where=str(path)) from None

    def layer(self, layer: Layer | str) -> Layer:
        return parse_layer_spec(layer, name="layer") if isinstance(layer, str) else layer

    def job(self, layer: Layer | str, a: np.ndarray, b: np.ndarray) -> tuple[Job, int]:
        """The layer laid out for this design and its predicted cycles; a layer that does not fit
        is refused in one line (:class:`AccelgenError` naming the layer and what does not fit)."""
        layer = self.layer(layer)
        df = resolve_dataflow(dataflow_from_spec(self.dataflow), layer, self.hardware)
        tiles = tiles_of(self.structure, df, layer)
        operands = [_int8_operand(layer, name, got, want)
                    for name, got, want in zip(("first operand", "second operand"), (a, b), _operand_shapes(layer))]
        return make_job(self.structure, tiles, layer, *operands, self.l2_words), hwgen_cycles(self.structure, tiles)


def _int8_operand(layer: Layer, name: str, value, shape: tuple[int, ...]) -> np.ndarray:
    arr = np.asarray(value)
    where = f"layer {layer.name!r}"
    if arr.shape != shape:
        raise AccelgenError(f"the {name} has shape {arr.shape!r}, expected {shape!r}", where=where)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.array_equal(arr, np.round(arr)):
            raise AccelgenError(f"the {name} holds {arr.dtype} values; expected int8 integers", where=where)
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < -128 or arr.max() > 127):
        raise AccelgenError(f"the {name} holds {int(arr.min())}..{int(arr.max())}; expected int8 (-128..127)",
                            where=where)
    return arr


def _operand_shapes(layer: Layer) -> tuple[tuple[int, ...], tuple[int, ...]]:
    from costmodel.workload.layers import GEMM
    if isinstance(layer, GEMM):
        return (layer.M, layer.K), (layer.K, layer.N)
    return (layer.C, layer.Y, layer.X), (layer.K, layer.C, layer.R, layer.S)


class Transport(Protocol):
    def read(self, address: int) -> int: ...
    def write(self, address: int, value: int, strobe: int = 0xF) -> None: ...


class CallableTransport:
    """Any register access: ``read(byte_address) -> int``, ``write(byte_address, value)``."""

    def __init__(self, read: Callable[[int], int], write: Callable[[int, int], None]):
        self._read, self._write = read, write

    def read(self, address: int) -> int:
        return int(self._read(address)) & 0xFFFFFFFF

    def write(self, address: int, value: int, strobe: int = 0xF) -> None:
        if strobe != 0xF:          # a plain register write sends all four bytes: keep the rest 0
            value &= int.from_bytes(bytes(0xFF if strobe >> i & 1 else 0 for i in range(4)), "little")
        self._write(address, value & 0xFFFFFFFF)


class MmioTransport:
    """The AXI4-Lite aperture mapped from ``/dev/mem`` (or a UIO device, base 0) at ``base``."""

    def __init__(self, base: int, device: str = "/dev/mem", size: int = 4096):
        try:
            fd = os.open(device, os.O_RDWR | os.O_SYNC)
        except OSError as err:
            raise AccelgenError(f"cannot open it ({err.strerror}); run as root or give a UIO device",
                                where=device) from None
        try:
            self._mem = mmap.mmap(fd, size, offset=base)
        finally:
            os.close(fd)
        self._view = memoryview(self._mem).cast("I")

    def read(self, address: int) -> int:
        return int(self._view[address // 4])

    def write(self, address: int, value: int, strobe: int = 0xF) -> None:
        self._view[address // 4] = value & 0xFFFFFFFF


class Device:
    """A design behind a blocking transport."""

    def __init__(self, design: Design, transport: Transport):
        self.design, self.transport = design, transport

    def check(self) -> None:
        """Refuse hardware whose register map or L2 is not this design's."""
        r = register_map()
        info = self.transport.read(r.address("info"))
        if r["info"].get(info, "magic") != MAGIC:
            raise AccelgenError(f"info reads 0x{info:08x}, not an accelgen register map", where="accelgen_axi_top")
        for name in ("input", "weight", "output"):
            got = self.transport.read(r.address(f"l2_{name}_words"))
            if got != self.design.l2_words[name]:
                raise AccelgenError(f"l2_{name}_words reads {got}, the design {self.design.name} has "
                                    f"{self.design.l2_words[name]}", where="accelgen_axi_top")

    def execute(self, prog: Generator[Op, object, tuple[list[int], int]]) -> tuple[list[int], int]:
        t = self.transport
        reply: object = None
        try:
            while True:
                op = prog.send(reply)
                reply = None
                if isinstance(op, Write):
                    t.write(op.address, op.value, op.strobe)
                elif isinstance(op, Read):
                    reply = t.read(op.address)
                else:
                    raise AccelgenError(f"this transport has no AXI4-Stream port for {type(op).__name__}",
                                        where=type(t).__name__)
        except StopIteration as stop:
            return stop.value

    def run(self, layer: Layer | str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, int]:
        """Load, configure, start, wait, read back: ``(outputs, cycles)``; outputs ``[K, Y', X']``
        for a convolution, ``[M, N]`` for a GEMM (int32)."""
        layer = self.design.layer(layer)
        job, _ = self.design.job(layer, a, b)
        words, cycles = self.execute(program(job))
        out = np.array(words, dtype=np.int32)
        from costmodel.workload.layers import GEMM
        if isinstance(layer, GEMM):
            return out.reshape(layer.N, layer.M).T, cycles
        return out.reshape(layer.K, layer.Yo, layer.Xo), cycles
