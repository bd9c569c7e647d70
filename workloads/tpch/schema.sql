-- TPC-H's customer, orders and lineitem (the columns the queries use), filled by SQL at
-- about scale factor 0.1 (15,000 customers, 150,000 orders, 600,000 line items). Values
-- come from a hash of the row number, so every run builds the same tables.
CREATE FUNCTION h(i bigint, salt int) RETURNS bigint IMMUTABLE LANGUAGE sql AS
  $$ SELECT abs(hashint8(i * 7919 + salt))::bigint $$;
CREATE TABLE customer AS
  SELECT c AS c_custkey, 'Customer#' || c AS c_name,
         (ARRAY['AUTOMOBILE','BUILDING','FURNITURE','HOUSEHOLD','MACHINERY'])[1 + h(c, 1) % 5] AS c_mktsegment,
         (h(c, 2) % 1000000) / 100.0 AS c_acctbal
  FROM generate_series(1, 15000) c;
CREATE TABLE orders AS
  SELECT o AS o_orderkey, 1 + h(o, 3) % 15000 AS o_custkey,
         date '1992-01-01' + (h(o, 4) % 2405)::int AS o_orderdate,
         (ARRAY['1-URGENT','2-HIGH','3-MEDIUM','4-NOT SPECIFIED','5-LOW'])[1 + h(o, 5) % 5] AS o_orderpriority,
         0 AS o_shippriority, (h(o, 6) % 50000000) / 100.0 AS o_totalprice
  FROM generate_series(1, 150000) o;
CREATE TABLE lineitem AS
  SELECT 1 + (l - 1) / 4 AS l_orderkey, 1 + h(l, 7) % 20000 AS l_partkey,
         1 + (h(l, 8) % 50) AS l_quantity, (h(l, 9) % 10000000) / 100.0 AS l_extendedprice,
         (h(l, 10) % 11) / 100.0 AS l_discount, (h(l, 11) % 9) / 100.0 AS l_tax,
         (ARRAY['A','N','R'])[1 + h(l, 12) % 3] AS l_returnflag,
         (ARRAY['F','O'])[1 + h(l, 13) % 2] AS l_linestatus,
         date '1992-01-02' + (h(l, 14) % 2526)::int AS l_shipdate,
         date '1992-01-31' + (h(l, 15) % 2526)::int AS l_commitdate,
         date '1992-01-03' + (h(l, 16) % 2526)::int AS l_receiptdate,
         (ARRAY['REG AIR','AIR','RAIL','SHIP','TRUCK','MAIL','FOB'])[1 + h(l, 17) % 7] AS l_shipmode,
         (h(l, 18) % 150) AS l_ptype
  FROM generate_series(1, 600000) l;
CREATE INDEX ON orders (o_orderkey);
CREATE INDEX ON customer (c_custkey);
ANALYZE;
