"""The two tables an episode of the site records, from which every KPI is computed: hourly flows and departures.

Why the lowest layer: the CityLearn env and the twin write these tables, the LP optimum writes its plan
in them, the KPIs read them and the report plots them; one definition here keeps all of them on the
same columns, and none of them has to import another to agree.
"""

# Columns of the hourly energy-flow table of an episode (one row per simulated hour, kW = kWh/h).
FLOW_COLUMNS = (
    "pv_kw",  # PV AC generation available
    "mall_kw",  # non-shiftable mall load served
    "ev_kw",  # energy into the chargers (grid side) this hour
    "bess_charge_kw",  # energy drawn by the BESS (grid side, >= 0)
    "bess_discharge_kw",  # energy delivered by the BESS (grid side, >= 0)
    "grid_import_kw",  # >= 0
    "grid_export_kw",  # >= 0 (earns nothing; PV curtailment/export)
    "bess_soc",  # BESS state of charge at the END of the hour, fraction of capacity
    "price_per_kwh",
    "carbon_intensity_kg_per_kwh",
)

# Columns of the per-departure table of an episode (one row per EV that left).
DEPARTURE_COLUMNS = (
    "socket",
    "departure_step",  # the step at whose start the EV left
    "required_soc",
    "departure_soc",
    "energy_delivered_kwh",  # battery-side energy charged during the visit
    "unmet_kwh",  # battery-side energy still missing to required_soc (>= 0)
)
