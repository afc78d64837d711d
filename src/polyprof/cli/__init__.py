"""The polyprof command line: verbs over the library, nothing more."""
