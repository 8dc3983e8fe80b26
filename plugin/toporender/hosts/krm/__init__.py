"""The KRM function (kustomize / kpt) and the kustomize legacy exec plugin behind ``toporender krm``.

KRM function mode (no argument): one ``ResourceList`` (``config.kubernetes.io/v1``) on stdin, one on
stdout. Legacy exec plugin mode (``toporender krm CONFIG_FILE``, as kustomize calls
``<plugin> /tmp/kust-plugin-config-NNN``): the config is read from the file, resources (transformer
use; empty for generators) come as a plain YAML stream on stdin, and a plain YAML stream goes out.

Inputs, either
- from disk: ``spec.path`` of the function config names a toporender repo directory (relative to the
  working directory: the kustomization root for kustomize, the process cwd for kpt), rendered with
  :func:`toporender.pipeline.render_repo`; or
- as items (``toporender.dev/v1alpha1``): one ``RepoConfig`` (``spec`` = toporender.yaml content),
  ``Workflow`` items (``spec`` = one OSMO workflow document), and the inventory as ``NodeInventory``
  items or ``v1 Node`` items marked ``config.kubernetes.io/local-config: "true"``, rendered with
  :func:`toporender.pipeline.render_documents`.

Output: every item we do not own passes through unchanged (ruamel.yaml round-trip: comments,
quoting and key order survive; kustomize/kpt annotations are untouched); items we generated in an
earlier run (``toporender.dev/workflow`` / ``toporender.dev/pool`` labels) are replaced by the fresh
render; consumed inputs are removed, except items that come from a file of a kpt package (they
carry a path annotation, and removing them would delete the user's source files); ``spec.keepInputs``
overrides that. Generated objects are appended in render order; inside a package they get
``config.kubernetes.io/path`` = ``<outputDir>/<source>`` (default ``generated/workflows/x.yaml``).

Errors: ``results`` entries (``severity: error``, ``message``, ``resourceRef``, ``file{path,index}``),
the same lines on stderr, **and** exit code 1 (kustomize and kpt ignore results on exit 0); the
items are then returned unchanged. In legacy mode and for ``--export``, the problems go to stderr only.

:mod:`.resource_list` reads and writes the wire formats; :mod:`.function` is the function itself. Import
from those modules; this package exports nothing.
"""
