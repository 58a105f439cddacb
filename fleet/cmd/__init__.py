"""The command line: the invoke tasks (``tasks_*``, gathered by ``collection``) and the glue
behind them (I/O shell, no decisions)."""
