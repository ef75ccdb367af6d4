import { fetchCart, LocalCart } from "./api";

describe("fetchCart", () => {
  it("loads a stored cart", async () => {
    const store = new LocalCart();
    await store.save({ id: "c1", items: ["apple"] });
    expect((await fetchCart(store, "c1")).items).toEqual(["apple"]);
  });
});
