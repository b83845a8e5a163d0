"""Every plot, drawn from tables only: ``plotting`` (Figures 2–6 from a
FigureSpec), ``sweep_plot`` (its panels against the sweep value, from the runs
tables), ``rates_plot`` (Figure 5), ``tuning_plot``, ``sensitivity_plot``
(Figure 7's grid)."""
