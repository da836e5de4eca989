"""How long a test waits on a subprocess before it calls it hung.

A guard against a hang, never a speed test: on a busy machine (CI beside other jobs, two cores
at load 17) the quick grid alone has taken over 10 minutes. So the default is generous, 30
minutes, and ANATOMY_TEST_HANG_S sets it for a machine slower or busier still.
"""

from __future__ import annotations

import os

HANG_S = float(os.environ.get("ANATOMY_TEST_HANG_S", 1800))
