"""RTL generator: arrives with the RTL issue."""

__all__ = []
