"""The `eoslog` command (the console script) and `python -m eoslog`."""

import gc
import sys


def main() -> None:
    # Start-up builds ~25,000 objects that live as long as the process (modules, classes, the configuration)
    # and almost no garbage (~600 unreachable objects). Collecting while importing walks the survivors again
    # and again: ~8% of the time `eoslog serve` takes to listen (docs/benchmarks.md). So the collector is off
    # until the command is known: `serve` turns it back on once it has frozen what start-up built
    # (server/gc_policy.py); every other command turns it on before it runs (cli.py).
    gc.disable()
    if sys.argv[1:2] == ["serve"]:
        # A plain `serve` command line runs without importing click (~9 ms of CPU before the port opens);
        # anything click must parse or report goes through click below (server/serve_command.py).
        from eoslog.server.serve_command import parse_serve_args, serve_without_click

        params = parse_serve_args(sys.argv[2:])
        if params is not None:
            serve_without_click(params)
            return
    from eoslog.cli import main as cli_main

    # "eoslog", not "python -m eoslog", in --version, usage lines and the shell-completion variable.
    cli_main(prog_name="eoslog")


if __name__ == "__main__":
    main()
