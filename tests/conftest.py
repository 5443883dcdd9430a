import os
import sys

from hypothesis import HealthCheck, settings

# CORTEX_NO_SPEEDUPS=1 runs the tests on the pure-Python path: the optional C accelerator
# cortex._speedups imports as absent, as in an install without a C compiler (tools/mutate.py
# mutates that path). It must act before anything imports cortex.
if os.environ.get("CORTEX_NO_SPEEDUPS"):
    sys.modules["cortex._speedups"] = None  # type: ignore[assignment]

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=100,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
