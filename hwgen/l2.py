"""The banked L2: input and weight regions in ``W`` interleaved int8 banks (word ``a`` in bank
``a mod W``), so the distribution NoC reads ``W`` consecutive words a cycle from any address;
outputs in one int32 bank, read-modify-written by the drain."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module, signed, unsigned
from amaranth.lib.memory import Memory

__all__ = ["L2"]


@dataclass
class L2:
    """The memories' ports: ``inputs[b]`` / ``weights[b]`` are bank ``b``'s (read, write) ports."""

    inputs: list
    weights: list
    out_read: object
    out_write: object

    @classmethod
    def build(cls, m: Module, words: dict[str, int], banks: int) -> "L2":
        def banked(name: str) -> list:
            depth = max(1, -(-words[name] // banks))
            ports = []
            for b in range(banks):
                mem = Memory(shape=unsigned(8), depth=depth, init=[])
                m.submodules[f"l2_{name}_{b}"] = mem
                ports.append((mem.read_port(), mem.write_port()))
            return ports
        inputs, weights = banked("input"), banked("weight")
        out_mem = Memory(shape=signed(32), depth=max(1, words["output"]), init=[])
        m.submodules.l2_output = out_mem
        return cls(inputs, weights, out_mem.read_port(), out_mem.write_port())
