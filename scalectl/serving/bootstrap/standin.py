"""The vLLM stand-in's form: the command-line arguments a local process takes (model, length, sequences)."""

from __future__ import annotations

from scalectl.sizing.server import ServerDescription, arg_value

STANDIN_FLAGS = ("--max-model-len", "--max-num-seqs")  # the engine flags the stand-in understands


def standin_args(desc: ServerDescription) -> tuple[str, ...]:
    args = ["--model", desc.model]
    for flag in STANDIN_FLAGS:
        value = arg_value(desc.args, flag)
        if value is not None:
            args += [flag, value]
    return tuple(args)
