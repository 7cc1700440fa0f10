-- Sales: CRM and order-to-cash of a wholesale supplier.
-- Money is exact decimal text ("1234.50"); unit prices carry 4 decimals.
-- Ids follow the order in which records are created, as in the real system.
-- Every child key is indexed: tools read a party's or a sale's records by it, and inserting a
-- parent row looks its children up by it.

-- Payment terms: an invoice falls due ``days`` after its invoice date (the date it was posted).
CREATE TABLE payment_terms (
    id    INTEGER PRIMARY KEY,
    name  TEXT NOT NULL,
    days  INTEGER NOT NULL CHECK (days >= 0)
);

-- Sale price lists (the real system's product price lists): a line's unit price is the first matching line's
-- formula (``unit_price`` is the product's list price) rounded half-to-even to 4 decimals. A line matches a
-- product (NULL: any) from a quantity (NULL: any); lines are tried by sequence.
CREATE TABLE price_lists (
    id    INTEGER PRIMARY KEY,
    name  TEXT NOT NULL
);

CREATE TABLE price_list_lines (
    id            INTEGER PRIMARY KEY,
    price_list_id INTEGER NOT NULL REFERENCES price_lists(id),
    sequence      INTEGER NOT NULL,
    product_id    INTEGER REFERENCES products(id),
    quantity      INTEGER,                 -- applies from this quantity up (NULL: any)
    formula       TEXT NOT NULL,           -- as the real system evaluates it
    factor        TEXT NOT NULL            -- the formula's factor of the list price
);
CREATE INDEX price_list_lines_list ON price_list_lines(price_list_id, sequence, id);

CREATE TABLE parties (
    id      INTEGER PRIMARY KEY,
    code    TEXT NOT NULL UNIQUE,
    name    TEXT NOT NULL,
    role    TEXT NOT NULL CHECK (role IN ('company', 'employee', 'customer')),
    payment_term_id INTEGER REFERENCES payment_terms(id),  -- the customer's payment term (none: due at once)
    credit_limit    TEXT,  -- the most the customer may owe, orders not yet invoiced included (NULL: no limit)
    price_list_id   INTEGER REFERENCES price_lists(id),  -- the customer's sale price list (NULL: list prices)
    sale_invoice_method TEXT CHECK (sale_invoice_method IN ('manual', 'order', 'fulfillment'))
                          -- the invoice method the customer's new sales take (NULL: the company's, 'order')
);

CREATE TABLE addresses (
    id          INTEGER PRIMARY KEY,
    party_id    INTEGER NOT NULL REFERENCES parties(id),
    street      TEXT NOT NULL,
    city        TEXT NOT NULL,
    postal_code TEXT NOT NULL
);
CREATE INDEX addresses_party ON addresses(party_id);

CREATE TABLE contacts (
    id       INTEGER PRIMARY KEY,
    party_id INTEGER NOT NULL REFERENCES parties(id),
    type     TEXT NOT NULL CHECK (type IN ('email', 'phone')),
    value    TEXT NOT NULL
);
CREATE INDEX contacts_party ON contacts(party_id);

CREATE TABLE products (
    id          INTEGER PRIMARY KEY,
    code        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    list_price  TEXT NOT NULL,
    on_hand     INTEGER NOT NULL CHECK (on_hand >= 0)
);

CREATE TABLE opportunities (
    id          INTEGER PRIMARY KEY,
    number      TEXT NOT NULL,
    party_id    INTEGER NOT NULL REFERENCES parties(id),
    description TEXT NOT NULL,
    amount      TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('lead', 'opportunity', 'converted', 'won', 'lost', 'cancelled')),
    lost_reason TEXT
);
CREATE INDEX opportunities_party ON opportunities(party_id);

CREATE TABLE sales (
    id              INTEGER PRIMARY KEY,
    number          TEXT,
    party_id        INTEGER NOT NULL REFERENCES parties(id),
    description     TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('draft', 'quotation', 'confirmed', 'processing', 'done', 'cancelled')),
    invoice_state   TEXT NOT NULL,
    shipment_state  TEXT NOT NULL,
    opportunity_id  INTEGER REFERENCES opportunities(id),  -- the opportunity converted into this sale
    amounts_cache   TEXT,  -- "untaxed tax total" frozen when the sale was cancelled (cleared when reset to draft)
    payment_term_id INTEGER REFERENCES payment_terms(id),  -- the customer's term when the sale was created
    price_list_id   INTEGER REFERENCES price_lists(id),    -- the customer's price list when the sale was created
    return_of       INTEGER REFERENCES sales(id),          -- a return sale: the sale it returns (negative lines)
    -- 'order': one invoice for the whole order when it is confirmed; 'fulfillment': an invoice for what each
    -- shipment sends, when it is sent; 'manual': none made by the system
    invoice_method  TEXT NOT NULL DEFAULT 'order' CHECK (invoice_method IN ('manual', 'order', 'fulfillment'))
);
CREATE INDEX sales_party ON sales(party_id);
CREATE INDEX sales_return_of ON sales(return_of);
CREATE INDEX sales_opportunity ON sales(opportunity_id);

CREATE TABLE sale_lines (
    id          INTEGER PRIMARY KEY,
    sale_id     INTEGER NOT NULL REFERENCES sales(id),
    product_id  INTEGER NOT NULL REFERENCES products(id),
    quantity    INTEGER NOT NULL,
    unit_price  TEXT NOT NULL,
    discount    TEXT NOT NULL
);
CREATE INDEX sale_lines_sale ON sale_lines(sale_id);

CREATE TABLE approvals (
    id        INTEGER PRIMARY KEY,
    sale_id   INTEGER NOT NULL REFERENCES sales(id),
    discount  TEXT NOT NULL,
    reason    TEXT NOT NULL
);
CREATE INDEX approvals_sale ON approvals(sale_id);

CREATE TABLE shipments (
    id       INTEGER PRIMARY KEY,
    sale_id  INTEGER NOT NULL REFERENCES sales(id),
    state    TEXT NOT NULL CHECK (state IN ('waiting', 'assigned', 'done', 'cancelled'))
);
CREATE INDEX shipments_sale ON shipments(sale_id);

-- What a shipment carries: one move per sale line (a backorder carries what is left of each line).
-- ``invoice_id``: the invoice whose line bills the move (an order's invoice bills every move of its lines, a
-- backorder's too; invoiced on fulfillment, a move is billed by the invoice its sending made; NULL: not yet).
CREATE TABLE shipment_moves (
    id          INTEGER PRIMARY KEY,
    shipment_id INTEGER NOT NULL REFERENCES shipments(id),
    sale_id     INTEGER NOT NULL REFERENCES sales(id),
    line_id     INTEGER NOT NULL REFERENCES sale_lines(id),
    product_id  INTEGER NOT NULL REFERENCES products(id),
    quantity    INTEGER NOT NULL CHECK (quantity > 0),
    invoice_id  INTEGER REFERENCES invoices(id)
);
CREATE INDEX shipment_moves_shipment ON shipment_moves(shipment_id);
CREATE INDEX shipment_moves_line ON shipment_moves(line_id);
CREATE INDEX shipment_moves_sale ON shipment_moves(sale_id);
CREATE INDEX shipment_moves_invoice ON shipment_moves(invoice_id);

-- Customer return shipments (the real system's own kind, numbered apart from shipments): what a return sale
-- takes back, ``draft`` until received into the warehouse (``done``: stock back on hand).
CREATE TABLE return_shipments (
    id       INTEGER PRIMARY KEY,
    sale_id  INTEGER NOT NULL REFERENCES sales(id),
    state    TEXT NOT NULL CHECK (state IN ('draft', 'received', 'done', 'cancelled'))
);
CREATE INDEX return_shipments_sale ON return_shipments(sale_id);

CREATE TABLE return_moves (
    id          INTEGER PRIMARY KEY,
    shipment_id INTEGER NOT NULL REFERENCES return_shipments(id),
    sale_id     INTEGER NOT NULL REFERENCES sales(id),
    line_id     INTEGER NOT NULL REFERENCES sale_lines(id),
    product_id  INTEGER NOT NULL REFERENCES products(id),
    quantity    INTEGER NOT NULL CHECK (quantity > 0)
);
CREATE INDEX return_moves_shipment ON return_moves(shipment_id);
CREATE INDEX return_moves_line ON return_moves(line_id);
CREATE INDEX return_moves_sale ON return_moves(sale_id);

CREATE TABLE invoices (
    id            INTEGER PRIMARY KEY,
    sale_id       INTEGER NOT NULL REFERENCES sales(id),
    number        TEXT,
    state         TEXT NOT NULL CHECK (state IN ('draft', 'posted', 'paid', 'cancelled')),
    untaxed       TEXT NOT NULL,
    tax           TEXT NOT NULL,
    total         TEXT NOT NULL,
    paid          TEXT NOT NULL,                  -- payments applied to it
    writeoff      TEXT NOT NULL DEFAULT '0.00',   -- written off when it was settled (negative: an excess kept)
    overpaid      TEXT NOT NULL DEFAULT '0.00',   -- received beyond what it applied (left as the customer's
                                                  -- credit, or kept by a negative write-off)
    credit_of     INTEGER REFERENCES invoices(id), -- a credit note: the invoice it credits (negated amounts)
    invoice_date  TEXT,                           -- the business date it was posted (NULL while a draft)
    due_date      TEXT                            -- invoice date plus its sale's payment term (NULL while a draft)
);
CREATE INDEX invoices_sale ON invoices(sale_id);
CREATE INDEX invoices_credit_of ON invoices(credit_of);

CREATE TABLE sequences (
    name TEXT PRIMARY KEY,
    next INTEGER NOT NULL
);

-- Record ids the system draws and never reuses, even after a delete (sale lines can be removed).
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    next INTEGER NOT NULL
);
