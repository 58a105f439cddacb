"""``invoke timeline``: the fleet's runs as one picture (issue 14).

``model`` and ``trace_view`` turn markers and the sweeper's trace into runs, lanes, dark periods,
sweeps and bands (pure); ``layout`` and ``render`` draw them as one self-contained HTML page (pure);
``write`` and ``browser`` are the I/O: the board, the trace, the file, and Chromium for the PNG.
"""
