"""Sub-commands of the tablesense command line, one module each."""
