"""Where a step's work units run: in this process or on a Ray cluster (`executor`), and the Ray
calls themselves (`cluster`). No other module knows where it runs."""
