"""A page's choices kept in its URL, so a reload or a shared link opens the same view.

`widget(...)` draws a Streamlit widget whose first value comes from a query parameter of the
link (`/curves?run=llama · seed 42&log=true`), else from the page's default, and whose value is
written back to the URL after every change, so the address bar always holds the current view.

How values read in a URL:

- only values that differ from the page's default are written, which keeps links short;
- a list is one parameter repeated (`?split=val&split=train`), the way `st.query_params` writes
  lists; an empty list is the parameter with nothing after `=` (`?run=`);
- a value the page cannot use (a run that is not in this database, a typo) is left out and
  named in one caption under the widget: a stale link still opens, it never crashes the page.
  It is named as text (`tables.markdown_literal`), never as Markdown: a link is anyone's to write.

Streamlit's own `bind="query-params"` names each parameter after the widget's key and drops such
values without a word; this module lets the page choose readable names and says what it dropped.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import streamlit as st

from anatomy.language import _, join_list
from dashboard.tables import markdown_literal

Parse = Callable[[str], Any]  # the text of a parameter -> a value; raises ValueError for a bad one


def flag(text: str) -> bool:
    """A toggle's value as written in a URL: true or false."""
    if text not in ("true", "false"):
        raise ValueError(text)
    return text == "true"


def number_between(low: float, high: float) -> Parse:
    """A slider's value: a number the slider can take (outside its range, Streamlit would raise)."""

    def parse(text: str) -> float:
        value = float(text)
        if not low <= value <= high:
            raise ValueError(text)
        return value

    return parse


def as_text(value: Any) -> str:
    """One value as it is written in a URL."""
    if value is None:  # a choice left empty
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"  # 0.15, never 0.15000000000000002
    return str(value)


def as_texts(value: Any) -> list[str]:
    """A widget's value as the list of texts of its parameter ([""] for an empty list)."""
    if isinstance(value, (list, tuple)):
        return [as_text(item) for item in value] or [""]
    return [as_text(value)]


def from_url(param: str, options: Sequence | None, parse: Parse | None) -> tuple[list, list[str]]:
    """The values the link gives `param`, and the texts that were no valid value (dropped)."""
    texts = [text for text in st.query_params.get_all(param) if text != ""]
    if options is not None:
        by_text = {as_text(option): option for option in options}
        return [by_text[t] for t in texts if t in by_text], [t for t in texts if t not in by_text]
    values, dropped = [], []
    for text in texts:
        try:
            values.append(parse(text) if parse else text)
        except ValueError:
            dropped.append(text)
    return values, dropped


def first_value(param: str, default: Any, options: Sequence | None, parse: Parse | None) -> tuple[Any, list[str]]:
    """The value a widget starts with: the link's, else `default`; and the texts it had to drop."""
    if param not in st.query_params:
        return default, []
    values, dropped = from_url(param, options, parse)
    if isinstance(default, list):
        if dropped and not values:  # every value was unusable: not the same as an empty `?run=`
            return default, dropped
        return list(dict.fromkeys(values)), dropped  # a value repeated in the link is chosen once
    return (values[-1] if values else default), dropped  # as st.query_params[param] reads it: the last


SHOWN_DROPPED = 3  # a link can hold any number of values, each of any length: a few, cut short
SHOWN_CHARACTERS = 60


def cut_short(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """`text`, or its first characters and "…" where it is longer than `limit`."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def say_dropped(param: str, dropped: list[str]) -> None:
    """One line naming what the link asked for that this page cannot show: each value as text,
    never as markup (a link is anyone's to write), the first few, each cut short."""
    values = [markdown_literal(cut_short(text)) for text in dropped[:SHOWN_DROPPED]]
    if len(dropped) > SHOWN_DROPPED:
        # TRANSLATORS: the last item of a list of values: how many more there are, not named
        values.append(_("{count} more").format(count=len(dropped) - SHOWN_DROPPED))
    st.caption(
        _("Left out from the link: {param} {values}, not among the choices here.").format(
            param=param, values=join_list(values)
        ),
        help=_("The link was made on another database, or by hand. The rest of it is restored."),
    )


def to_url(param: str, value: Any, default: Any) -> None:
    """Write a widget's value into the URL, or take the parameter out when it is the default."""
    if value == default:
        if param in st.query_params:
            del st.query_params[param]
    elif st.query_params.get_all(param) != as_texts(value):  # unchanged: send the browser nothing
        st.query_params[param] = as_texts(value)


def widget(
    make: Callable,
    label: str,
    options: Sequence | None = None,
    *,
    key: str,
    param: str,
    default: Any,
    parse: Parse | None = None,
    **kwargs,
) -> Any:
    """`make(label, options, key=key, **kwargs)`, a widget function such as `st.multiselect` or
    `cols[0].toggle`, with its value kept in the URL parameter `param`. Returns its value.

    With `options`, a URL value must be one of them; without, `parse` reads it (`flag`,
    `number_between(...)`). A list `default` makes the parameter a list.
    """
    dropped = []
    if key not in st.session_state:  # the widget's first render in this session: the link decides
        # the value goes in through Session State, so the widget itself gets no default
        # (Streamlit warns about a widget given both)
        st.session_state[key], dropped = first_value(param, default, options, parse)
    args = (label,) if options is None else (label, options)
    value = make(*args, key=key, **kwargs)
    if dropped:
        say_dropped(param, dropped)
    to_url(param, value, default)
    return value
