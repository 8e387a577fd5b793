"""Test support shipped with autoparser: the peg_tester fluent API, GBNF oracle access, syrupy extensions."""
