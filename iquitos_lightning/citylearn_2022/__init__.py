"""The CityLearn 2022 challenge benchmark: its measured data, the published protocol's scoring, references and
agents."""
