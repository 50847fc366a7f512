"""Recorded-fixture tests skip on a laptop without shared/ and fail under CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import fixture_path


def test_a_missing_fixtures_directory_fails_under_ci(tmp_path: Path):
    with pytest.raises(pytest.fail.Exception) as info:
        fixture_path("anthropic", "x.json", root=tmp_path / "shared" / "fixtures", env={"CI": "true"})
    assert "CI=true" in str(info.value) and "fixtures directory" in str(info.value)
    assert "shared/ directory is expected beside the checkout" in str(info.value)


@pytest.mark.parametrize("env", [{}, {"CI": ""}, {"CI": "false"}])
def test_outside_ci_it_is_a_skip_that_says_why(tmp_path: Path, env):
    with pytest.raises(pytest.skip.Exception) as info:
        fixture_path("anthropic", "x.json", root=tmp_path / "nope", env=env)
    assert "recorded fixtures directory" in str(info.value) and "README" in str(info.value)


def test_a_missing_file_in_a_present_directory_also_fails_under_ci(tmp_path: Path):
    with pytest.raises(pytest.fail.Exception, match="is missing from"):
        fixture_path("gone.json", root=tmp_path, env={"CI": "1"})
    (tmp_path / "here.json").write_text("{}")
    assert fixture_path("here.json", root=tmp_path, env={"CI": "true"}) == tmp_path / "here.json"
