"""LocalSites, driven with a plain HTTP client: the fixture sites behave as documented."""

from __future__ import annotations

import pytest

from session_keeper.testing import LocalSites, RecordedRequest, SiteResponse


def billing_login(sites: LocalSites, user: str = "alice", password: str = "correct horse") -> str:
    """Sign in to billing.example; return the session cookie value ('' on failure)."""
    resp = sites.request(
        "billing.example", "/login", method="POST", form={"username": user, "password": password}
    )
    cookie = resp.header("Set-Cookie") or ""
    return cookie.split(";", 1)[0].partition("=")[2] if resp.status == 303 else ""


def test_billing_login_sets_a_fresh_httponly_session_cookie(sites: LocalSites) -> None:
    """A good sign-in redirects to /invoices with a new HttpOnly session cookie each time."""
    resp = sites.request(
        "billing.example",
        "/login",
        method="POST",
        form={"username": "alice", "password": "correct horse"},
    )
    assert resp.status == 303
    assert resp.header("Location") == "/invoices"
    cookie = resp.header("Set-Cookie") or ""
    assert cookie.startswith("billing_session=")
    assert "HttpOnly" in cookie
    assert "Max-Age" not in cookie  # a session cookie
    assert billing_login(sites) != billing_login(sites)


def test_billing_refuses_wrong_password_and_anonymous_reads(sites: LocalSites) -> None:
    """Wrong credentials get 401 and no cookie; /invoices and /card need a login."""
    assert billing_login(sites, password="wrong") == ""
    assert sites.request("billing.example", "/invoices").status == 401
    assert (
        sites.request("billing.example", "/card", method="POST", form={"card": "4242"}).status
        == 401
    )
    token = billing_login(sites)
    page = sites.request("billing.example", "/invoices", cookies={"billing_session": token})
    assert page.status == 200
    assert "INV-1001" in page.body


def test_configurable_billing_accounts() -> None:
    """billing_accounts replaces the default credentials."""
    with LocalSites(billing_accounts={"bob": "pw"}) as own:
        assert billing_login(own, "bob", "pw")
        assert billing_login(own) == ""


def test_card_update_is_shown_on_invoices(sites: LocalSites) -> None:
    """POST /card changes the card on file that /invoices shows (last four digits only)."""
    jar = {"billing_session": billing_login(sites)}
    form = {"card": "4111111111111234"}
    resp = sites.request("billing.example", "/card", method="POST", form=form, cookies=jar)
    assert resp.status == 200
    assert "**** 1234" in sites.request("billing.example", "/invoices", cookies=jar).body


@pytest.mark.parametrize("via", ["form", "header"])
def test_refund_is_created_at_most_once_per_key(sites: LocalSites, via: str) -> None:
    """Repeating a refund with the same idempotency key replays it; readback finds it."""
    jar = {"billing_session": billing_login(sites)}
    key = f"refund-key-{via}"
    before = sites.refund_count()

    def refund() -> tuple[int, dict[str, object]]:
        form = {"amount": "12.00"}
        headers = {}
        if via == "form":
            form["idempotency_key"] = key
        else:
            headers["Idempotency-Key"] = key
        r = sites.request(
            "billing.example", "/refund", method="POST", form=form, headers=headers, cookies=jar
        )
        return r.status, r.json()

    status1, first = refund()
    status2, second = refund()
    assert (status1, status2) == (201, 200)
    assert first["refund_id"] == second["refund_id"]
    assert (first["replayed"], second["replayed"]) == (False, True)
    assert sites.refund_count() == before + 1
    readback = sites.request("billing.example", f"/refunds/{key}", cookies=jar)
    assert readback.json() == {
        "found": True,
        "refund_id": first["refund_id"],
        "status": "succeeded",
        "amount": "12.00",
    }
    missing = sites.request("billing.example", "/refunds/never-sent", cookies=jar)
    assert (missing.status, missing.json()) == (404, {"found": False})


def test_refund_without_key_is_refused(sites: LocalSites) -> None:
    """A refund with no idempotency key is a 400 and creates nothing."""
    jar = {"billing_session": billing_login(sites)}
    before = sites.refund_count()
    resp = sites.request("billing.example", "/refund", method="POST", form={}, cookies=jar)
    assert resp.status == 400
    assert sites.refund_count() == before


def test_sso_persistent_login_switch_and_whoami(sites: LocalSites) -> None:
    """sso.example sets a one-day cookie; /switch issues a new one and retires the old."""
    resp = sites.request("sso.example", "/login?account=ann", method="POST")
    cookie = resp.header("Set-Cookie") or ""
    assert "Max-Age=86400" in cookie
    ann = cookie.split(";", 1)[0].partition("=")[2]
    who = sites.request("sso.example", "/whoami", cookies={"sso_session": ann})
    assert who.json() == {"account": "ann"}
    switched = sites.request("sso.example", "/switch?account=bob", cookies={"sso_session": ann})
    bob = (switched.header("Set-Cookie") or "").split(";", 1)[0].partition("=")[2]
    assert bob not in ("", ann)
    assert sites.request("sso.example", "/whoami", cookies={"sso_session": bob}).json() == {
        "account": "bob"
    }
    assert sites.request("sso.example", "/whoami", cookies={"sso_session": ann}).status == 401
    assert sites.request("sso.example", "/switch?account=x").status == 401


def test_docs_and_todo_pages_are_served(sites: LocalSites) -> None:
    """docs.example serves its static pages, todo.example its TodoMVC; unknown paths 404."""
    assert "<h1>Guide</h1>" in sites.request("docs.example", "/guide").body
    todo = sites.request("todo.example", "/").body
    assert 'class="todo-list"' in todo
    assert "Buy milk" in todo
    assert sites.request("docs.example", "/nope").status == 404
    assert sites.request("elsewhere.example", "/").status == 421


def test_requests_are_recorded_with_their_cookies(sites: LocalSites) -> None:
    """Each request is recorded (host, method, path, headers, cookies); clear_requests empties."""
    sites.clear_requests()  # the server is shared by the test session
    sites.request("docs.example", "/guide?x=1", cookies={"a": "1", "b": "2"})
    sites.request("sso.example", "/whoami", method="GET")
    (docs,) = sites.requests("docs.example")
    assert (docs.host, docs.method, docs.path, docs.query) == (
        "docs.example",
        "GET",
        "/guide",
        "x=1",
    )
    assert docs.cookies == (("a", "1"), ("b", "2"))
    assert docs.cookie("b") == "2"
    assert docs.header("host") == "docs.example"
    assert len(sites.requests()) == 2
    sites.clear_requests()
    assert sites.requests() == []


def test_url_and_host_rules(sites: LocalSites) -> None:
    """url() builds the browser-facing URL; host_resolver_rules maps *.example to the port."""
    assert sites.url("billing.example", "invoices") == "http://billing.example/invoices"
    assert sites.host_resolver_rules == f"MAP *.example 127.0.0.1:{sites.port}"


def test_extra_sites_answer_first_and_leave_the_rest_to_the_built_in_pages() -> None:
    """An extra_sites handler serves its host (and, first, a built-in one); None falls back."""
    seen: list[RecordedRequest] = []

    def shop(request: RecordedRequest) -> SiteResponse | None:
        seen.append(request)
        if request.path == "/basket":
            body = f"{request.scheme} {request.arg('item')} {request.cookie('c')}"
            return SiteResponse(status=201, headers=(("Content-Type", "text/plain"),), body=body)
        return None

    def docs_override(request: RecordedRequest) -> SiteResponse | None:
        return (
            SiteResponse(status=200, headers=(), body="<p>ours</p>")
            if request.path == "/api"
            else None
        )

    with LocalSites(extra_sites={"shop.example": shop, "docs.example": docs_override}) as own:
        basket = own.request(
            "shop.example", "/basket?item=q", method="POST", form={"item": "f"}, cookies={"c": "1"}
        )
        assert (basket.status, basket.body) == (201, "http f 1")  # the form wins over the query
        assert basket.header("Content-Type") == "text/plain"
        assert own.request("shop.example", "/elsewhere").status == 404
        moved = own.request("shop.example", "/redirect?to=http://docs.example/guide")
        assert (moved.status, moved.header("Location")) == (302, "http://docs.example/guide")
        assert own.request("docs.example", "/api").body == "<p>ours</p>"
        assert "<h1>Guide</h1>" in own.request("docs.example", "/guide").body
        assert own.request("todo.example", "/").status == 421  # not a LocalSites page
        assert [r.path for r in seen] == ["/basket", "/elsewhere", "/redirect"]
        assert own.requests("shop.example")[0].body == b"item=f"


def test_the_gallery_can_show_raster_images(sites: LocalSites) -> None:
    """/gallery?img=png lists its images as /pixel.png, served on billing and docs as a
    well-formed 1x1 PNG (every chunk's CRC holds)."""
    import struct
    import zlib

    from session_keeper.testing._site_pages import PIXEL_PNG

    jar = {"billing_session": billing_login(sites)}
    page = sites.request("billing.example", "/gallery?n=3&img=png", cookies=jar).body
    assert page.count("<img src='/pixel.png?i=") == 3
    for host in ("billing.example", "docs.example"):
        image = sites.request(host, "/pixel.png", cookies=jar)
        assert (image.status, image.header("Content-Type")) == (200, "image/png")
    assert PIXEL_PNG.startswith(b"\x89PNG\r\n\x1a\n")
    rest, kinds = PIXEL_PNG[8:], []
    while rest:
        (length,) = struct.unpack(">I", rest[:4])
        kind, data, crc = rest[4:8], rest[8 : 8 + length], rest[8 + length : 12 + length]
        assert struct.unpack(">I", crc)[0] == zlib.crc32(kind + data)
        kinds.append(kind)
        rest = rest[12 + length :]
    assert kinds == [b"IHDR", b"IDAT", b"IEND"]
    assert struct.unpack(">II", PIXEL_PNG[16:24]) == (1, 1)
