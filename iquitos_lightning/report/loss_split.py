"""Where an agent's remaining gap comes from: the planning horizon, what it did not learn, what it could not know.

Why: "the agents close 89 % of the gap" does not say what the last 11 points are made of, and the lever against
them depends on it. The ladder optimum -> ``mpc_perfect`` -> ``<agent>+oracle`` -> ``<agent>`` splits them in three,
each a difference of two rows of the same table: a 24 h planner with the true coming hours loses the **horizon**'s
part (it cannot see the month's later peaks); the same agent trained and run with the true coming hours in its
observation (``compare``'s ``+oracle`` variant: same layout, budget, selection and seeds) loses, beyond that, what
it did not **learn**; the agent with past-days forecasts, what it could not know (**information**). A part can be
negative: an agent that sees the month-to-date peak can beat a 24 h planner with the true hours.
"""

from __future__ import annotations

import pandas as pd

HOURS_KNOWN = "+oracle"  # compare's variant of an agent with the true coming hours in its observation
PARTS = ("horizon", "learning", "information")
SPLIT_INTRO = "Where each agent's remaining gap comes from"  # the split's first words (the results page finds it)


def loss_split(table: pd.DataFrame, agent: str, optimum: str, perfect: str) -> dict[str, float] | None:
    """Points of the rule-to-optimum gap the agent leaves, by part (they sum to ``100 - its gap closed``), from the
    table's mean ``gap_closed_pct``; None when the table lacks the agent's hours-known row or a rung."""
    rows = (optimum, perfect, agent + HOURS_KNOWN, agent)
    if not all(row in table.index for row in rows):
        return None
    best, planner, known, past = (float(table.loc[row, "gap_closed_pct"]) for row in rows)
    return {"horizon": best - planner, "learning": planner - known, "information": known - past}


def loss_split_markdown(table: pd.DataFrame, agents: list[str], optimum: str, perfect: str) -> list[str]:
    """The split of every agent that has its hours-known row, as a markdown table (no lines when none has)."""
    splits = {agent: loss_split(table, agent, optimum, perfect) for agent in agents if not agent.endswith(HOURS_KNOWN)}
    found = {agent: split for agent, split in splits.items() if split is not None}
    if not found:
        return []
    lines = [
        f"{SPLIT_INTRO}, in points of the gap: horizon = `{optimum}` - `{perfect}` "
        f"(a 24 h plan with the true hours); learning = `{perfect}` - `<agent>{HOURS_KNOWN}` (the agent with the true "
        f"coming hours, same layout, budget and seeds); information = `<agent>{HOURS_KNOWN}` - `<agent>` (past-days "
        "forecasts instead of the true hours).",
        "",
        "| agent | gap left [points] | horizon | learning | information |",
        "|:---|---:|---:|---:|---:|",
    ]
    for agent, split in found.items():
        cells = " | ".join(f"{split[part]:.1f}" for part in PARTS)
        lines.append(f"| {agent} | {sum(split.values()):.1f} | {cells} |")
    return [*lines, ""]


def hours_known_first(agents: list[str]) -> list[str]:
    """The agents in ladder order: each hours-known variant before the agents with past days."""
    return [agent for agent in agents if agent.endswith(HOURS_KNOWN)] + [
        agent for agent in agents if not agent.endswith(HOURS_KNOWN)
    ]
