"""The model card's monitoring section: written, replaced in place, read back."""
import numpy as np

from gatescope.export.monitoring_reference import read_reference, section, update_card


def test_section_round_trips_and_replaces_itself(tmp_path):
    card = tmp_path / "README.md"
    card.write_text("# m\n\n## Result\nok\n\n## Serving metadata\n```json\n{}\n```\n")
    values = np.array([[0.5, 0.25], [0.7, 0.75]])
    update_card(card, section({"gate_mean": values}, "two images"))
    [record] = read_reference(card)
    assert record["metric"] == "gatescope_gate_mean"
    assert record["examples"] == 2
    assert record["mean"] == [0.6, 0.5] and record["std"] == [0.1, 0.25]
    assert "| 1 | 0.5000 | 0.2500 |" in card.read_text()
    # Written again with other values, the section is replaced, the rest kept.
    update_card(card, section({"vigilance_mean": values[:, :1]}, "two images"))
    text = card.read_text()
    assert text.count("## Monitoring reference") == 1
    assert "## Serving metadata" in text and "## Result\nok" in text
    [record] = read_reference(card)
    assert record["metric"] == "gatescope_vigilance_crossing" and record["mean"] == [0.6]


def test_section_before_another_heading_is_replaced_in_place(tmp_path):
    card = tmp_path / "README.md"
    card.write_text("# m\n\n## Monitoring reference\nold\n\n## Later\nkept\n")
    update_card(card, section({"gate_mean": np.array([[0.5]])}, "one image"))
    text = card.read_text()
    assert "old" not in text and text.endswith("## Later\nkept\n")
    assert read_reference(card)[0]["mean"] == [0.5]


def test_card_without_section_has_no_reference(tmp_path):
    card = tmp_path / "README.md"
    card.write_text("# m\n")
    assert read_reference(card) == []
