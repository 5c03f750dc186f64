"""The banked L2: the input and weight regions in ``W`` interleaved banks (word ``a`` in bank
``a mod W``, row ``a // W``), so any ``W`` consecutive words are one access: the distribution
NoC reads ``W`` int8 input or weight words a cycle.  The output region has as many banks as the
drain's run needs, ``V <= W`` (:meth:`~costmodel.hwgen_preset.structure.HwStructure.output_banks`,
word ``a`` in bank ``a mod V``): the drain read-modify-writes up to its lanes' consecutive int32
outputs a cycle, and fewer, deeper banks take fewer ports, adders and wires for the same block
RAMs.  The host bus reads and writes one word at a time.

The loader reads one tensor a cycle, so a bank's input and weight words share one memory (an
*operand bank*): the larger region's rows below ``2**split_bits``, the other's from there, so a
row is its region's row with one bit above it (:meth:`L2.operand_row`), no adder.  Against a
memory per region this takes no more block RAMs wherever the larger region's rows are a power of
two (the regions' sizes usually are; a third fewer on ``small`` with its L2 cut to fit an
LFE5U-85F, whose 64 banks of each region are shallower than a block RAM), and the loader needs
no choice of tensor after the banks."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Value

from .ram import Ram

__all__ = ["L2"]


@dataclass
class L2:
    """The memories' ports: ``operands[b]`` / ``outputs[b]`` are bank ``b``'s (read, write)
    ports, ``high`` the region ("input" or "weight") whose rows start at ``2**split_bits``."""

    operands: list
    outputs: list
    split_bits: int
    high: str

    @classmethod
    def build(cls, m: Module, words: dict[str, int], banks: int, output_banks: int) -> "L2":
        rows = {name: max(1, -(-words[name] // banks)) for name in ("input", "weight")}
        rows["output"] = max(1, -(-words["output"] // output_banks))
        low, high = ("input", "weight") if rows["input"] >= rows["weight"] else ("weight", "input")
        split_bits = (rows[low] - 1).bit_length()
        operands = []
        for b in range(banks):
            ram = Ram(m, f"l2_operand_{b}", 8, (1 << split_bits) + rows[high])
            operands.append((ram.read, ram.write))
        outputs = []
        for b in range(output_banks):
            ram = Ram(m, f"l2_output_{b}", 32, rows["output"], signed=True)
            outputs.append((ram.read, ram.write))
        return cls(operands, outputs, split_bits, high)

    def operand_row(self, row, is_high) -> Value:
        """The operand bank's row of ``row`` of a region (``is_high``: the region at the top)."""
        row = Value.cast(row)
        low = Cat(row, Const(0, max(0, self.split_bits - len(row))))[:self.split_bits]
        return Cat(low, is_high)
