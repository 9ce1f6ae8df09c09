"""What report/report.qmd and its partials call: loading tables, drawing charts, and rendering the report.

- page:        the tables the pipeline passed to the report, and how charts, tables and notes reach the page
               (vega JavaScript inlined once per page, SVG renderer, no network);
- sections:    the sections every report has: the environment, and the missing or failed results;
- study_a:     Study A's training curve and summary (computed by a rule) and its figure;
- render:      .qmd -> one self-contained HTML file, through Quarto or through Jupyter.
"""
