from app.client import Client, fetch_user


def test_fetch_user():
    c = Client("http://shop.invalid")
    assert fetch_user(c, 7)["url"].endswith("/users/7")
