import { fetchCart, LocalCart } from "./api";

const store = new LocalCart();

export async function cartSize(id: string): Promise<number> {
  const cart = await fetchCart(store, id);
  return cart.items.length;
}
