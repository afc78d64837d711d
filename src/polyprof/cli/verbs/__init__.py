"""One module per verb: NAME, HELP, EXAMPLES, add_arguments(parser), run(args, env) -> int."""
