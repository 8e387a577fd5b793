"""pytest plugin (entry point `pytest11`): fixtures for contributors' tests."""
