from eoslog.cli import main

# "eoslog", not "python -m eoslog", in --version, usage lines and the shell-completion variable.
main(prog_name="eoslog")
