"""The ``accelgen`` command line.

    accelgen analyze --model resnet50 --dataflow kcp --hw small
    accelgen analyze --mapping tests/data/maestro/small_cnn_kcp.m --format json
    accelgen explore --model resnet50 --space configs/space/resnet50.yaml --out out/r50
    accelgen map --model resnet50 --layer layer2.0.conv2 --dataflow kcp,cp --hw small --budget 2000
    accelgen emit --dataflow kcp --hw tiny --out out/kcp
    accelgen verify --dataflow kcp --hw tiny --layer conv2d:K=8,C=4,Y=6,X=6,R=3,S=3 --sim verilator
    accelgen flow --model configs/workloads/tiny_cnn.yaml --space configs/space/flow_demo.yaml --out out/flow
    accelgen list

Each subcommand is one entry of :data:`_COMMANDS` (its arguments and its run function, imported
when the command runs); the argument groups they share are in :mod:`.options`.

Every user error is one line on stderr, ``accelgen: error: <message>``, exit status 1 (2 for a
command-line usage error); never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import sys
from dataclasses import dataclass
from typing import NoReturn, Sequence

from costmodel.base import AccelgenError

from .options import PROG

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line like every other error (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {' '.join(message.split())} (see '{self.prog} --help')\n")


@dataclass(frozen=True)
class _Command:
    name: str
    help: str
    module: str               # the module (of this package) with the arguments and the run function
    arguments: str
    run: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        getattr(importlib.import_module(f".{self.module}", __package__), self.arguments)(parser)

    def __call__(self, args: argparse.Namespace) -> int:
        return int(getattr(importlib.import_module(f".{self.module}", __package__), self.run)(args))


_COMMANDS: tuple[_Command, ...] = (
    _Command("analyze", "analyse a model layer by layer on one hardware and dataflow",
             "analyze", "analyze_arguments", "run_analyze"),
    _Command("explore", "search a design space for the Pareto-optimal accelerators of a model",
             "explore", "explore_arguments", "run_explore"),
    _Command("map", "search the tile sizes and loop orders of a dataflow for each layer on one hardware",
             "mapcmd", "map_arguments", "run_map"),
    _Command("list", "list the built-in models, dataflows, hardware and presets", "analyze", "list_arguments",
             "run_list"),
    _Command("emit", "generate the accelerator's Verilog, file list and manifest", "hwcommands", "emit_arguments",
             "run_emit"),
    _Command("verify", "run a layer on the generated RTL in a simulator: cycles and numerics",
             "hwcommands", "verify_arguments", "run_verify"),
    _Command("flow", "from a network to a verified, synthesised accelerator and a report, in one command",
             "flow", "flow_arguments", "run_flow"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="accelgen: analytical cost model of DNN accelerators.")
    commands = parser.add_subparsers(title="commands", dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(sub)
        sub.set_defaults(run=command)
    return parser


def _error(message: str) -> None:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        _error("interrupted")
    except BrokenPipeError:  # e.g. `accelgen analyze ... | head`: the reader left; say nothing
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
    except AccelgenError as exc:
        _error(str(exc))
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"{where}{exc.strerror or exc}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
