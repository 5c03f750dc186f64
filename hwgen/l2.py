"""The banked L2: input and weight regions in ``W`` interleaved int8 banks (word ``a`` in bank
``a mod W``), so the distribution NoC reads ``W`` consecutive words a cycle from any address;
outputs in one int32 bank, read-modify-written by the drain."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module

from .ram import Ram

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
                ram = Ram(m, f"l2_{name}_{b}", 8, depth)
                ports.append((ram.read, ram.write))
            return ports
        inputs, weights = banked("input"), banked("weight")
        out = Ram(m, "l2_output", 32, max(1, words["output"]), signed=True)
        return cls(inputs, weights, out.read, out.write)
