"""The diagnosis as a report section: the findings (why the GPU waits, the straggler, what failed
first, a workload with its own profiler), and the tables that carry them: idle time by cause per
rank (steady state and whole run), per step, the ranks' waits per step, and HTA's own idle-time
breakdown beside ours."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profilectl.model.document import Column, Finding, Section, TableBlock

if TYPE_CHECKING:
    from profilectl.read.summary import Summary

OWN_PROFILER = "the workload runs torch.profiler itself"


def diagnosis_section(summary: "Summary") -> Section | None:
    diagnosis = summary.diagnosis
    own = next((note for note in summary.notes if note.startswith(OWN_PROFILER)), None)
    if diagnosis is None and own is None:
        return None
    findings: list[Finding] = []
    if own is not None:
        findings.append(Finding(verdict="own-profiler", sentence=own, scope="run",
                                next_step="Read the workload's traces with `profilectl report`, or turn its "
                                          "torch.profiler off to let profilectl's run alone."))
    tables: list[TableBlock] = []
    notes: list[str] = []
    if diagnosis is not None:
        findings += diagnosis.findings
        notes.append(f"the steady-state verdict covers {diagnosis.scope}")
        from profilectl.analysis.diagnosis import figures_of
        steady_rows = [(rank.rank, rank.scope.split(" (")[0], rank.steady_span_ns, rank.steady_idle_ns, f.busy_percent,
                        f.exposed_ns, 100.0 * f.exposed_share, f.copy_ns, 100.0 * f.copy_share)
                       for rank in diagnosis.ranks if rank.steady_span_ns for f in [figures_of(rank)]]
        if steady_rows:  # what every steady verdict is judged on (a job's: the mean of these rows)
            tables.append(TableBlock(
                key="steady_state", title="Steady state per rank (what the verdicts are judged on)",
                columns=(Column("rank", "Rank"), Column("scope", "Steps"), Column("span_ns", "Span", "ns", "sum"),
                         Column("idle_ns", "GPU idle", "ns", "sum"), Column("busy_percent", "GPU busy", "percent"),
                         Column("exposed_ns", "Exposed comm", "ns", "sum"),
                         Column("exposed_percent", "Exposed % of span", "percent"),
                         Column("copy_ns", "Copies", "ns", "sum"), Column("copy_percent", "Copies % of busy", "percent")),
                rows=tuple(steady_rows), shown=16))
        cause_rows = []
        for rank in diagnosis.ranks:
            for scope, causes in (("steady", rank.steady), ("whole run", rank.whole)):
                cause_rows += [(rank.rank, scope, c.cause, c.title, c.idle_ns, 100.0 * c.share, c.gaps, c.activity or "")
                               for c in causes]
        if cause_rows:
            tables.append(TableBlock(
                key="idle_causes", title="GPU idle time by cause (what the host ran across each gap)",
                columns=(Column("rank", "Rank"), Column("scope", "Scope"), Column("cause", "Cause"),
                         Column("title", "What"), Column("idle_ns", "Idle", "ns", "sum"),
                         Column("percent", "% of idle", "percent"), Column("gaps", "Gaps", "count", "sum"),
                         Column("activity", "Largest host activity")),
                rows=tuple(cause_rows), shown=12))
        step_rows = [(rank.rank, s.step, s.phase, s.wall_ns, s.idle_ns, s.causes[0][0] if s.causes else "",
                      s.causes[0][1] if s.causes else 0) for rank in diagnosis.ranks for s in rank.steps]
        if step_rows:
            tables.append(TableBlock(
                key="idle_steps", title="GPU idle time per step",
                columns=(Column("rank", "Rank"), Column("step", "Step"), Column("phase", "Phase"),
                         Column("wall_ns", "Wall", "ns", "sum"), Column("idle_ns", "Idle", "ns", "sum"),
                         Column("top_cause", "Top cause"), Column("top_cause_ns", "Its idle", "ns", "sum")),
                rows=tuple(step_rows), shown=20))
        found = diagnosis.stragglers
        if found is not None and found.steps:
            tables.append(TableBlock(
                key="rank_waits", title=f"Ranks' waits per steady step (collectives: {found.basis})",
                columns=(Column("rank", "Rank"), Column("step", "Step"), Column("wall_ns", "Wall", "ns", "sum"),
                         Column("collective_ns", "In collectives", "ns", "sum"),
                         Column("own_ns", "Own work", "ns", "sum"),
                         Column("end_skew_ns", "Step end after earliest", "ns", "max")),
                rows=tuple((s.rank, s.step, s.wall_ns, s.collective_ns, s.own_ns, s.end_skew_ns)
                           for s in found.steps), shown=20))
            if found.why_none:
                notes.append(f"no straggler named: {found.why_none}")
        hta_rows = [(rank.rank, h.stream, h.host_wait_ns, h.kernel_wait_ns, h.other_ns)
                    for rank in diagnosis.ranks for h in rank.hta]
        if hta_rows:
            tables.append(TableBlock(
                key="hta_idle", title="HTA's idle-time breakdown per stream",
                columns=(Column("rank", "Rank"), Column("stream", "Stream"),
                         Column("host_wait_ns", "Host wait", "ns", "sum"),
                         Column("kernel_wait_ns", "Kernel wait", "ns", "sum"), Column("other_ns", "Other", "ns", "sum")),
                rows=tuple(hta_rows), shown=10))
            notes.append("HTA's breakdown is per stream, between consecutive activities of that stream; ours is per "
                         "rank, over the holes of the union of every stream (docs/architecture.md: Diagnosis)")
    return Section(key="diagnosis", title="Diagnosis", tables=tuple(tables), findings=tuple(findings),
                   notes=tuple(notes))


build = diagnosis_section
