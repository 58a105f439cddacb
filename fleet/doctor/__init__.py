"""``invoke doctor``: every check a first run depends on, each a pass/fail line with its named
reason and fix (#11). The pure parts (findings, rendering, the worker script and its parser) are
``model.py`` and ``worker.py``; the checks that touch the world are ``checks.py``, in a registry
other modules add to (:func:`fleet.doctor.checks.register`)."""
