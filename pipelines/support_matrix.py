"""``python -m pipelines.support_matrix > docs/support_matrix.md``: the support matrix page, from the code's table.

The page is :func:`epscert.support.render_markdown` of :data:`epscert.support.TABLE`;
``tests/core/test_support_matrix.py`` fails when the committed page differs from it.
"""

from __future__ import annotations

import sys

from epscert.support import render_markdown


def main() -> int:
    sys.stdout.write(render_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
