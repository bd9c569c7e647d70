"""Writes the SQL of the mem-oltp workload to stdout: a TPC-C-shaped warehouse schema
(SPECjbb2000 models the same business: warehouses, districts, customers, stock, orders)
loaded into an in-memory SQLite database, then a seeded mix of new-order, payment and
order-status transactions. Deterministic: the same text for the same arguments."""

import random
import sys

WAREHOUSES, DISTRICTS, CUSTOMERS, ITEMS = 2, 10, 100, 4000
TRANSACTIONS = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
rng = random.Random(2000)
out = sys.stdout.write

out("PRAGMA journal_mode=OFF;\n")
out("CREATE TABLE warehouse(w_id INTEGER PRIMARY KEY, w_ytd REAL);\n")
out("CREATE TABLE district(d_w_id INT, d_id INT, d_next_o_id INT, d_ytd REAL,"
    " PRIMARY KEY(d_w_id, d_id));\n")
out("CREATE TABLE customer(c_w_id INT, c_d_id INT, c_id INT, c_balance REAL, c_data TEXT,"
    " PRIMARY KEY(c_w_id, c_d_id, c_id));\n")
out("CREATE TABLE item(i_id INTEGER PRIMARY KEY, i_price REAL, i_data TEXT);\n")
out("CREATE TABLE stock(s_w_id INT, s_i_id INT, s_quantity INT, s_ytd INT,"
    " PRIMARY KEY(s_w_id, s_i_id));\n")
out("CREATE TABLE orders(o_w_id INT, o_d_id INT, o_id INT, o_c_id INT, o_ol_cnt INT,"
    " PRIMARY KEY(o_w_id, o_d_id, o_id));\n")
out("CREATE TABLE order_line(ol_w_id INT, ol_d_id INT, ol_o_id INT, ol_number INT,"
    " ol_i_id INT, ol_quantity INT, ol_amount REAL);\n")
out("CREATE INDEX ol_order ON order_line(ol_w_id, ol_d_id, ol_o_id);\n")
out("BEGIN;\n")
for i in range(1, ITEMS + 1):
    out(f"INSERT INTO item VALUES({i},{rng.randint(100, 10000) / 100},'item{i:05d}');\n")
for w in range(1, WAREHOUSES + 1):
    out(f"INSERT INTO warehouse VALUES({w},0);\n")
    for i in range(1, ITEMS + 1):
        out(f"INSERT INTO stock VALUES({w},{i},{rng.randint(10, 100)},0);\n")
    for d in range(1, DISTRICTS + 1):
        out(f"INSERT INTO district VALUES({w},{d},1,0);\n")
        for c in range(1, CUSTOMERS + 1):
            out(f"INSERT INTO customer VALUES({w},{d},{c},0,'{'x' * rng.randint(30, 60)}');\n")
out("COMMIT;\n")
for _ in range(TRANSACTIONS):
    w, d = rng.randint(1, WAREHOUSES), rng.randint(1, DISTRICTS)
    c = rng.randint(1, CUSTOMERS)
    kind = rng.random()
    if kind < 0.45:  # new order
        n = rng.randint(5, 15)
        out("BEGIN;\n")
        out(f"INSERT INTO orders SELECT {w},{d},d_next_o_id,{c},{n} FROM district"
            f" WHERE d_w_id={w} AND d_id={d};\n")
        for k in range(1, n + 1):
            i, q = rng.randint(1, ITEMS), rng.randint(1, 10)
            out(f"UPDATE stock SET s_quantity = CASE WHEN s_quantity > {q} + 10 THEN"
                f" s_quantity - {q} ELSE s_quantity + 91 - {q} END, s_ytd = s_ytd + {q}"
                f" WHERE s_w_id={w} AND s_i_id={i};\n")
            out(f"INSERT INTO order_line SELECT {w},{d},d_next_o_id,{k},{i},{q},{q}*i_price"
                f" FROM district, item WHERE d_w_id={w} AND d_id={d} AND i_id={i};\n")
        out(f"UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id={w} AND d_id={d};\n")
        out("COMMIT;\n")
    elif kind < 0.88:  # payment
        amount = rng.randint(100, 500000) / 100
        out("BEGIN;\n")
        out(f"UPDATE warehouse SET w_ytd = w_ytd + {amount} WHERE w_id={w};\n")
        out(f"UPDATE district SET d_ytd = d_ytd + {amount} WHERE d_w_id={w} AND d_id={d};\n")
        out(f"UPDATE customer SET c_balance = c_balance - {amount}"
            f" WHERE c_w_id={w} AND c_d_id={d} AND c_id={c};\n")
        out("COMMIT;\n")
    else:  # order status
        out(f"SELECT count(*), sum(ol_amount) FROM orders JOIN order_line ON ol_w_id=o_w_id"
            f" AND ol_d_id=o_d_id AND ol_o_id=o_id WHERE o_w_id={w} AND o_d_id={d}"
            f" AND o_c_id={c};\n")
out("SELECT count(*), sum(ol_amount) FROM order_line;\n")
