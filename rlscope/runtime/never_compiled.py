"""rlscope's hooks as frames torch.compile never compiles.

Code a compiled function runs outside its graphs (after a graph break, in a resume function) calls
other Python functions with Dynamo's frame evaluation on, and Dynamo compiles every frame it does not
skip: rlscope's wrappers too (of ``nn.Module.__call__``, autograd's engine entry, the optimizer's step
hook), where a call into torch it skips is a graph break, and a wrapper compiled once is guarded on
what it closes over, so it recompiles. Its own frames are skipped as torch's are
(``torch._dynamo.eval_frame.skip_code``, what ``torch.compiler.disable(fn, recursive=False)`` does
for its wrapper), the functions they call are not: the user's modules inside still compile as they
would without rlscope. When Dynamo inlines one while tracing, the wrapper checks
``torch.compiler.is_compiling()`` itself and does nothing but call through.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from rlscope import _imports

_EVAL_FRAME = "torch._dynamo.eval_frame"


def skip(*functions: Callable[..., Any]) -> None:
    """Dynamo runs these functions' frames uncompiled, now or once the program imports Dynamo."""
    codes = [c for c in (getattr(f, "__code__", None) for f in functions) if c is not None]

    def mark(eval_frame: Any) -> None:
        skip_code = getattr(eval_frame, "skip_code", None)
        if skip_code is not None:
            for code in codes:
                skip_code(code)

    if _EVAL_FRAME in sys.modules:
        mark(sys.modules[_EVAL_FRAME])
    else:
        _imports.when_imported(_EVAL_FRAME, mark)
