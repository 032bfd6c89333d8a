"""loadtest/tools/script_calls.py: the script calls of a MONITOR capture,
grouped by SHA, arguments decoded, order ids made random for redis-benchmark."""
import hashlib
import importlib.util
import io
import os
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, '..', '..', 'loadtest', 'tools', 'script_calls.py')
spec = importlib.util.spec_from_file_location('script_calls', PATH)
script_calls = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script_calls)

SCRIPT = b'local v = redis.call("get", KEYS[1])\nreturn v'
MONITOR = (
    '1700000000.000001 [0 127.0.0.1:5000] "PING"\n'
    '1700000000.000002 [0 127.0.0.1:5000] "evalsha" "ABCDEF" "1" "stock:{S}" "o-17" "2"\n'
    '1700000000.000003 [0 lua] "get" "stock:{S}"\n'
    '1700000000.000004 [0 127.0.0.1:5000] "EVALSHA" "abcdef" "1" "stock:{S}" "o-18" "x\\"y\\\\z\\x01"\n'
    '1700000000.000005 [0 127.0.0.1:5000] "EVAL" "local v = redis.call(\\"get\\", KEYS[1])\\nreturn v" "0" "o-9"\n'
)


class ScriptCallsTest(unittest.TestCase):
    def run_on(self, text, prefix='o-'):
        with tempfile.TemporaryDirectory() as d:
            mon = os.path.join(d, 'mon')
            with open(mon, 'w', encoding='latin-1') as f:
                f.write(text)
            out = io.StringIO()
            with redirect_stdout(out):
                rc = script_calls.main(['script_calls.py', mon, os.path.join(d, 'out'), prefix])
            files = {}
            for name in os.listdir(os.path.join(d, 'out')) if os.path.isdir(os.path.join(d, 'out')) else []:
                with open(os.path.join(d, 'out', name), 'rb') as f:
                    files[name] = f.read()
            return rc, out.getvalue().splitlines(), files

    def test_grouped_by_sha_most_called_first(self):
        rc, lines, files = self.run_on(MONITOR)
        self.assertEqual(rc, 0)
        eval_sha = hashlib.sha1(SCRIPT).hexdigest()
        self.assertEqual(lines, ['2\tabcdef', f'1\t{eval_sha}'])
        # the last call's arguments, quotes and escapes decoded, order id randomised
        self.assertEqual(files['abcdef.args'],
                         b'1\0stock:{S}\0o-__rand_int__\0x"y\\z\x01\0')
        self.assertEqual(files[eval_sha + '.lua'], SCRIPT)
        self.assertEqual(files[eval_sha + '.args'], b'0\0o-__rand_int__\0')

    def test_nothing_called(self):
        rc, lines, files = self.run_on('1 [0 127.0.0.1:1] "PING"\n')
        self.assertEqual((rc, lines, files), (0, [], {}))

    def test_usage(self):
        with redirect_stderr(io.StringIO()) as err:
            self.assertEqual(script_calls.main(['script_calls.py']), 2)
        self.assertIn('MONITOR_FILE', err.getvalue())


if __name__ == '__main__':
    unittest.main()
