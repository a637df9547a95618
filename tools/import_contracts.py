"""An import-linter contract type that import-linter lacks: an allow-list of what a set of
modules may import (`type = allowed` in .importlinter).

import-linter's own contracts name what is forbidden (`forbidden`) or who may import a module
(`protected`); a pure core must say the opposite, what it may import, so that a module nobody
thought to forbid (`random`, `uuid`, `secrets`, a new driver library) breaks the contract the
day it arrives. The check: every module of `source_modules`, and every module of tablectl
they reach through tablectl's own imports, may import only `allowed_modules` (tablectl's
modules, as packages) and `allowed_external` (top-level names of the standard library and
of installed distributions; import-linter sees an external package under its top-level name
with `include_external_packages = True`). Imports inside functions and under TYPE_CHECKING
count, as in every contract here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output
from importlinter.domain.imports import Module


@dataclass(frozen=True)
class Refused:
    """An import outside the allow-list, and the chain from a source module to it."""

    importer: str
    imported: str
    line_numbers: tuple[int, ...]
    via: tuple[str, ...]  # source module ... importer


class AllowedContract(Contract):
    """Modules that import only what is listed: the allow-list contract.

    Configuration options:
        - source_modules:   the modules held to the list (as packages).
        - allowed_modules:  the modules of the root package they may reach (as packages).
        - allowed_external: the top-level names of external modules they may import.
    """

    type_name = "allowed"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_external = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        # The fields hold what they parsed from .importlinter (import-linter types them as
        # the field objects the class declares).
        sources = self._expand(graph, cast(list[Module], self.source_modules))
        allowed = self._expand(graph, cast(list[Module], self.allowed_modules))
        external = set(cast(list[str], self.allowed_external))
        # Every module reached from the sources through the root package's own imports, with
        # the chain that reached it first (breadth first: the shortest).
        via: dict[str, tuple[str, ...]] = {m: (m,) for m in sorted(sources)}
        queue = list(via)
        refused: list[Refused] = []
        while queue:
            importer = queue.pop(0)
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if graph.is_module_squashed(imported):  # an external package
                    ok = imported.split(".")[0] in external
                else:
                    ok = imported in allowed
                    if ok and imported not in via:
                        via[imported] = (*via[importer], imported)
                        queue.append(imported)
                if not ok:
                    details = graph.get_import_details(importer=importer, imported=imported)
                    lines = tuple(sorted({d["line_number"] for d in details}))
                    refused.append(Refused(importer, imported, lines, via[importer]))
        return ContractCheck(kept=not refused, metadata={"refused": refused})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for refused in check.metadata["refused"]:
            lines = ", ".join(map(str, refused.line_numbers)) or "?"
            output.print_error(
                f"{refused.importer} -> {refused.imported} (l.{lines}): not on the allow-list",
                bold=False,
            )
            if len(refused.via) > 1:
                output.print_error(f"  reached by {' -> '.join(refused.via)}", bold=False)
            output.new_line()

    @staticmethod
    def _expand(graph: ImportGraph, modules: list[Module]) -> set[str]:
        """The modules named, each with its descendants (as packages)."""
        found: set[str] = set()
        for module in modules:
            name = module.name
            if name not in graph.modules:
                raise ValueError(f"{name} is not a module of the graph (a typo in .importlinter?)")
            found.add(name)
            found |= graph.find_descendants(name)
        return found
