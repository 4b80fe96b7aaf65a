"""The command line: thin click commands over the library (main: diagnose, patterns, and the lazily
imported hook and fleet subcommands).  Only this folder imports click."""
