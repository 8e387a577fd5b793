"""The cross-engine matrix: every corpus template × every engine we can run, with autoparser as the reference.

Cases come from the template itself (its round-trip scenarios and their realistic variants, `cases`); each
engine answers behind one interface (`engines`: autoparser default and strict, llama.cpp through the live
oracle's driver, transformers with our response_template, SGLang's own parsers in their own environment);
`run` judges every answer, classifies each miss and counts; `page` writes reports/matrix/ (JSON, a page in
the corpus report's style, a Markdown summary). `autoparser matrix` (`cli`) is the command.
"""

__all__ = ["ENGINES"]

# The columns, in the page's order (each an `engines.Engine`'s name; `cli.engines` makes them).
ENGINES = ("autoparser", "autoparser-strict", "llama.cpp", "transformers", "sglang")
