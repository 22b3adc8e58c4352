# The shim is the `tiktoken` package of the interpreter that runs tiktoken's tests (tests/encode/tiktoken_suite.py),
# not test code: this suite's doctest collection leaves it alone.
collect_ignore = ["tiktoken"]
