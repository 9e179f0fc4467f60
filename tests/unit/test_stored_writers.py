"""Following a statement-logged DML through the triggers and functions it sets off."""

from __future__ import annotations

from cdc_console.core.schema import TableId
from cdc_console.mysql.logged_statements import body_targets, called_names
from cdc_console.mysql.stored_writers import (
    ANY_TABLE,
    StoredWriters,
    captured_in,
    stored_writers_of,
)

D = "shop"


def t(name: str, db: str = D) -> TableId:
    return TableId(db, name)


def test_body_targets_reads_every_dml_of_a_compound_body_and_nothing_else() -> None:
    body = """BEGIN
      DECLARE s VARCHAR(20) DEFAULT REPLACE(NEW.note, 'a', 'b');  -- a string function
      SET NEW.label = INSERT(NEW.label, 1, 2, 'xx');
      IF NEW.id > 0 THEN
        INSERT INTO audit (id) VALUES (NEW.id) ON DUPLICATE KEY UPDATE n = n + 1;
      ELSE
        UPDATE `other db`.totals SET n = n + 1 WHERE id = 1;
      END IF;
      SELECT id INTO @x FROM orders WHERE id = NEW.id FOR UPDATE;
      DELETE FROM queue WHERE id = NEW.id;
    END"""
    assert body_targets(body, D) == [t("audit"), t("totals", "other db"), t("queue")]
    # a DML whose targets do not read may change any table of the schema
    assert body_targets("BEGIN DELETE; END", D) == [None]


def test_called_names_are_every_name_before_a_parenthesis() -> None:
    text = "INSERT INTO t VALUES (`shop`.bump(1), lower('x'), f (2))"
    assert called_names(text) == ["VALUES", "shop.bump", "lower", "f"]


def test_reach_follows_triggers_and_functions_through_each_other() -> None:
    writers = stored_writers_of(
        [
            (D, D, "src", "INSERT INTO middle VALUES (NEW.id)"),
            (D, D, "middle", "BEGIN SET @n = log_it(NEW.id); END"),
        ],
        [(D, "log_it", "BEGIN UPDATE orders SET n = n + 1; RETURN 1; END"), (D, "hidden", None)],
    )
    assert writers.reached([t("src")], "INSERT INTO src VALUES (1)", D) == {
        t("middle"),
        t("orders"),
    }
    assert writers.reached([t("x")], "INSERT INTO x VALUES (shop.log_it(1))", D) == {t("orders")}
    # a function whose body the capture user may not read can have written anything
    assert writers.reached([t("x")], "INSERT INTO x VALUES (hidden())", D) == {ANY_TABLE}
    assert writers.reached([t("x")], "INSERT INTO x VALUES (upper('a'))", D) == set()


def test_creates_read_in_the_binlog_are_learned() -> None:
    writers = StoredWriters()
    writers.learn(
        "CREATE DEFINER=`root`@`localhost` TRIGGER `shop`.`src_ai` AFTER INSERT ON src "
        "FOR EACH ROW INSERT INTO orders (id) VALUES (NEW.id)",
        D,
    )
    writers.learn(
        "CREATE FUNCTION other.f(n INT) RETURNS INT DETERMINISTIC "
        "BEGIN DELETE FROM shop.orders WHERE id = n; RETURN n; END",
        D,
    )
    assert writers.reached([t("src")], "INSERT INTO src VALUES (1)", D) == {t("orders")}
    assert writers.reached([], "DO other.f(3)", D) == {t("orders")}


def test_captured_in_reads_wildcards() -> None:
    wanted = [t("orders"), t("users"), t("a", "other")]
    assert captured_in({t("orders")}, wanted) == [t("orders")]
    assert captured_in({TableId(D, "*")}, wanted) == [t("orders"), t("users")]
    assert captured_in({ANY_TABLE}, wanted) == sorted(wanted)
