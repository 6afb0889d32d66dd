"""A public name that moved keeps working, with a DeprecationWarning naming the new one."""

import pytest


def test_masking_config_is_masking_settings_with_a_warning() -> None:
    import clozeworks.trainer.data as data

    with pytest.warns(DeprecationWarning, match="MaskingConfig is now MaskingSettings"):
        old = data.MaskingConfig
    assert old is data.MaskingSettings
    with pytest.raises(AttributeError):
        data.NoSuchName  # noqa: B018
