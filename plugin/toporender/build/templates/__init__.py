"""Group templates and pod templates (OSMO's group and pod templates), rendered and merged into a gang's objects.

The template variables, what a value renders to, the merge rules and what a template may not set are
documented for template authors in docs/templates.md. The code is split along the same lines:
:mod:`.engine` renders values in a bounded Jinja2 sandbox, :mod:`.merge` merges rendered templates,
:mod:`.policy` checks what templates are and produce, and :mod:`.apply` applies them to a gang.
Import from those modules; this package exports nothing.
"""
