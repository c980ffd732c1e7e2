from eoslog.cli import main

main()
