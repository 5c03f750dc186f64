"""The banked L2: every region in ``W`` interleaved banks (word ``a`` in bank ``a mod W``, row
``a // W``), so any ``W`` consecutive words are one access: the distribution NoC reads ``W``
int8 input or weight words a cycle, and the drain read-modify-writes up to ``W`` consecutive
int32 outputs a cycle.  The host bus reads and writes one word at a time."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Module

from .ram import Ram

__all__ = ["L2"]


@dataclass
class L2:
    """The memories' ports: ``inputs[b]`` / ``weights[b]`` / ``outputs[b]`` are bank ``b``'s
    (read, write) ports."""

    inputs: list
    weights: list
    outputs: list

    @classmethod
    def build(cls, m: Module, words: dict[str, int], banks: int) -> "L2":
        def banked(name: str, width: int, signed: bool = False) -> list:
            depth = max(1, -(-words[name] // banks))
            ports = []
            for b in range(banks):
                ram = Ram(m, f"l2_{name}_{b}", width, depth, signed=signed)
                ports.append((ram.read, ram.write))
            return ports
        return cls(banked("input", 8), banked("weight", 8), banked("output", 32, signed=True))
