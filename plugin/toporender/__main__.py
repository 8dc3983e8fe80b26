from toporender.cli import main

main()
