"""The package's public surface stays complete and sorted."""

import inspect

import langmem_layer


def test_all_is_sorted_and_complete() -> None:
    names = langmem_layer.__all__
    assert list(names) == sorted(names)
    assert all(hasattr(langmem_layer, n) for n in names)
    public_imports = {
        n for n, v in vars(langmem_layer).items()
        if not n.startswith("_") and (inspect.isclass(v) or inspect.isfunction(v))
    }
    assert public_imports <= set(names), public_imports - set(names)


def test_public_callables_have_docstrings() -> None:
    for name in langmem_layer.__all__:
        obj = getattr(langmem_layer, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name
