"""Small templates covering the Jinja2 features chat templates use. make_expected.py renders each
with the real jinja2 (hf_jinja.py) into conformance.json; jinja_conformance_test.cc checks that
our engine gives the same text, or fails where jinja2 fails."""

MSGS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "What's 2+2?"},
]

# (name, template, variables[, hf]) -- hf=False renders with Jinja's defaults (no trim/lstrip).
CASES = [
    # --- whitespace control, trim_blocks / lstrip_blocks ---
    ("ws_trim_lstrip", "{% if true %}\n  a\n  {% endif %}\n  b  {# c #}\n d", {}),
    ("ws_defaults", "{% if true %}\n  a\n  {% endif %}\n  b  {# c #}\n d", {}, False),
    ("ws_minus", "a  {%- if true -%}  b  {%- endif -%}  c", {}),
    ("ws_var_minus", "a\n  {{- 'x' -}}  \n b", {}),
    ("ws_plus_keeps_lstrip", "a\n  {%+ if true %}x{% endif %}", {}),
    ("ws_plus_end_keeps_newline", "{% if true +%}\nx{% endif %}", {}),
    ("ws_lstrip_not_for_vars", "a\n   {{ 'v' }}\n", {}),
    ("ws_comment_lstrip", "x\n    {# note #}\ny", {}),
    ("ws_comment_minus", "x   {#- note -#}   y", {}),
    ("ws_trailing_newline_dropped", "abc\n", {}),
    ("ws_crlf", "a\r\nb\r\n{% if true %}\r\nc\r\n{% endif %}\r\n", {}),
    ("ws_raw", "{% raw %}{{ not parsed }} {% if %}{% endraw %}!", {}),
    ("ws_raw_minus", "x  {%- raw -%}  {{ a }}  {%- endraw -%}  y", {}),
    ("ws_nested_blocks",
     "{% for m in messages %}\n    {% if m.role == 'user' %}\n        U:{{ m.content }}\n    {% else %}\n        O:{{ m.content }}\n    {% endif %}\n{% endfor %}\n",
     {"messages": MSGS}),
    ("ws_lstrip_after_text_line", "text {% if true %}x{% endif %}", {}),
    ("ws_tab_lstrip", "a\n\t\t{% if true %}b{% endif %}", {}),
    # --- literals and operators ---
    ("lit_strings", "{{ 'a\\'b' }}|{{ \"c\\\"d\" }}|{{ 'tab\\there' }}|{{ 'u\\u00e9' }}|{{ 'x' 'y' }}", {}),
    ("lit_unknown_escape", "{{ 'a\\qb' }}|{{ 'nl\\n' }}", {}),
    ("lit_numbers", "{{ 1 }}|{{ 1.5 }}|{{ 1e3 }}|{{ 1_000 }}|{{ 0x1f }}|{{ 2.0 }}|{{ 1e16 }}|{{ 1e-5 }}|{{ 0.1 + 0.2 }}", {}),
    ("lit_consts", "{{ true }}{{ True }}{{ false }}{{ none }}{{ None }}", {}),
    ("lit_list_dict_tuple", "{{ [1, 'a', none, true] }}|{{ {'k': 'v', 'n': 1} }}|{{ (1,) }}|{{ (1, 2) }}|{{ () }}", {}),
    ("lit_repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"'] }}", {}),
    ("lit_repr_nested", "{{ {'a': [1, {'b': none}], 'c': (1, 'x')} }}", {}),
    ("arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }}", {}),
    ("arith_float", "{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 1 / 3 }} {{ 10 / 4 }} {{ 3 * 1.5 }}", {}),
    ("arith_bool", "{{ true + 1 }} {{ true * 3 }} {{ -true }}", {}),
    ("str_concat_mul", "{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ 3 * 'x' }} {{ 1 ~ 'b' ~ none ~ true }} {{ [1] + [2] }}", {}),
    ("str_plus_int_error", "{{ 'a' + 1 }}", {}),
    ("div_zero_error", "{{ 1 / 0 }}", {}),
    ("compare", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1, 2] < [1, 3] }}", {}),
    ("compare_mixed_error", "{{ 1 < 'a' }}", {}),
    ("in_not_in", "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ not 1 in [1] }}", {}),
    ("logic", "{{ 0 or 'x' }}|{{ 'a' and 'b' }}|{{ '' and 'b' }}|{{ none or [] }}|{{ not none }}", {}),
    ("cond_expr", "{{ 'y' if 1 else 'n' }}{{ 'y' if 0 else 'n' }}{{ 'only' if false }}|{{ 1 if false else 2 if true else 3 }}", {}),
    ("unary_minus_filter", "{{ -3|abs }} {{ -(3) }} {{ - 2 ** 2 }}", {}),
    ("precedence_tilde_error", "{{ 1 + 2 ~ 3 }}", {}),
    ("precedence_tilde", "{{ 'a' ~ 1 * 2 }} {{ 1 ~ 2 == '12' }} {{ 'x' ~ 3 if true }} {{ (1 + 2) ~ 3 }}", {}),
    # --- variables, attributes, items, undefined ---
    ("attr_vs_item", "{{ m.role }} {{ m['content'] }} {{ m.missing }}|{{ m['missing'] }}|", {"m": MSGS[0]}),
    ("undefined_print", "[{{ nothing }}][{{ nothing|default('d') }}][{{ nothing is defined }}]", {}),
    ("undefined_attr_error", "{{ nothing.attr }}", {}),
    ("undefined_item_error", "{{ nothing['x'] }}", {}),
    ("missing_attr_attr_error", "{{ m.missing.deeper }}", {"m": MSGS[0]}),
    ("none_attr_is_undefined", "[{{ x.foo }}][{{ x.foo is defined }}]", {"x": None}),
    ("index_out_of_range", "[{{ xs[5] }}][{{ xs[-1] }}][{{ 'abc'[1] }}][{{ 'abc'[-1] }}]", {"xs": [1, 2, 3]}),
    ("undefined_ops", "{{ (nothing|length) }} {{ nothing|list }} {{ nothing|string }}|{% for x in nothing %}x{% else %}empty{% endfor %}", {}),
    ("undefined_add_error", "{{ nothing + 1 }}", {}),
    ("undefined_compare", "{{ nothing == nothing }} {{ nothing == none }} {{ nothing != 1 }}", {}),
    ("dict_methods", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.get('a') }}|{{ d.get('zz') }}|{{ d.get('zz', 7) }}", {"d": {"a": 1, "b": [2]}}),
    ("dict_key_shadows_method", "{{ d.items is callable }}|{{ d['items'] }}|{{ d.get('items') }}", {"d": {"items": "mine"}}),
    ("dict_iteration_order", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "a": 2, "m": 3}}),
    ("list_mutation_forbidden", "{% set xs = [1] %}{{ xs.append(2) }}", {}),
    ("dict_mutation_forbidden", "{% set d = {} %}{{ d.update({'a': 1}) }}", {}),
    ("list_methods", "{{ [1, 2, 1].count(1) }} {{ ['a', 'b'].index('b') }}", {}),
    # --- slicing ---
    ("slices", "{{ xs[1:] }} {{ xs[:2] }} {{ xs[::-1] }} {{ xs[-2:] }} {{ xs[::2] }} {{ xs[5:] }} {{ 'hello'[1:3] }} {{ 'héllo'[::-1] }}", {"xs": [1, 2, 3, 4]}),
    ("slice_messages_reverse", "{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}", {"messages": MSGS}),
    # --- string methods ---
    ("str_strip", "[{{ '  a b  '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ '  a'.lstrip() }}][{{ 'a  \\n'.rstrip() }}][{{ 'abc'.rstrip('c') }}]", {}),
    ("str_split", "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a-b-c'.rsplit('-', 1) }} {{ 'x'.split('y') }}", {}),
    ("str_affix", "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.endswith('x') }}", {}),
    ("str_case", "{{ 'Hello World'.upper() }} {{ 'Hello'.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'straße'.upper() }}", {}),
    ("str_replace_find", "{{ 'aaa'.replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 2) }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'a-b'.count('-') }}", {}),
    ("str_join_format", "{{ ', '.join(['a', 'b']) }} {{ '{} and {}'.format('x', 'y') }} {{ '{name}!'.format(name='n') }} {{ '{0}{0}'.format('r') }}", {}),
    ("str_misc", "{{ '42'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'ab'.islower() }} {{ 'x'.center(5) }}| {{ '7'.zfill(3) }} {{ 'a\\nb'.splitlines() }}", {}),
    ("str_iter_len", "{{ 'héllo'|length }} {% for c in 'ab' %}[{{ c }}]{% endfor %} {{ 'héllo'|list }}", {}),
    ("str_percent", "{{ '%s-%d' % ('a', 3) }} {{ '%.2f' % 3.14159 }} {{ '%5s|%-5s|' % ('a', 'b') }}", {}),
    # --- filters ---
    ("f_trim_upper_lower", "[{{ '  x  '|trim }}][{{ 'xxhixx'|trim('x') }}][{{ 'ab'|upper }}][{{ 'AB'|lower }}][{{ 'hello wORLD-foo'|title }}][{{ 'hELLO'|capitalize }}]", {}),
    ("f_length_count", "{{ [1, 2]|length }} {{ 'abc'|count }} {{ {'a': 1}|length }}", {}),
    ("f_default", "{{ none|default('x') }}|{{ ''|default('x') }}|{{ ''|default('x', true) }}|{{ 0|d('z', true) }}|{{ nothing|d }}|", {}),
    ("f_join", "{{ [1, 2, 3]|join(', ') }} {{ ['a', 'b']|join }} {{ users|join(', ', attribute='name') }}", {"users": [{"name": "a"}, {"name": "b"}]}),
    ("f_first_last", "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ 'abc'|last }} [{{ []|first }}] {{ {'a': 1, 'b': 2}|first }}", {}),
    ("f_string_safe_list", "{{ 12|string ~ 'x' }} {{ 'a'|safe }} {{ (1, 2)|list }} {{ {'a': 1}|list }}", {}),
    ("f_int_float", "{{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 'q'|float }} {{ 3|float }} {{ true|int }}", {}),
    ("f_abs_round", "{{ -2|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 7|round }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }}", {}),
    ("f_items_dictsort", "{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %} {{ d|dictsort }} {{ d|dictsort(by='value', reverse=true) }}", {"d": {"b": 1, "a": 3, "C": 2}}),
    ("f_items_undefined", "[{% for k, v in nothing|items %}{{ k }}{% endfor %}]", {}),
    ("f_map_select", "{{ msgs|map(attribute='role')|list }} {{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('|') }} {{ msgs|rejectattr('role', 'eq', 'user')|list|length }}", {"msgs": MSGS}),
    ("f_select_tests", "{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [0, 1, '', 'a']|select|list }} {{ [1, 5, 9]|select('gt', 3)|list }} {{ ['a', 1]|select('string')|list }}", {}),
    ("f_map_filter", "{{ [' a ', 'b ']|map('trim')|list }} {{ ['a', 'b']|map('upper')|join }} {{ ['x-y']|map('replace', '-', '+')|list }}", {}),
    ("f_map_default", "{{ msgs|map(attribute='name', default='anon')|list }}", {"msgs": [{"name": "a"}, {}]}),
    ("f_selectattr_defined", "{{ msgs|selectattr('tool_calls', 'defined')|list|length }} {{ msgs|selectattr('tool_calls')|list|length }}", {"msgs": [{"tool_calls": [1]}, {}, {"tool_calls": []}]}),
    ("f_sort_unique", "{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} {{ [1, 2, 1, 3]|unique|list }} {{ ['a', 'A']|unique|list }}", {}),
    ("f_sort_attribute", "{{ users|sort(attribute='age')|map(attribute='name')|join }}", {"users": [{"name": "b", "age": 3}, {"name": "a", "age": 1}]}),
    ("f_min_max_sum", "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ [1, 2, 3]|sum }} {{ users|sum(attribute='n') }} {{ ['b', 'A']|max }}", {"users": [{"n": 2}, {"n": 5}]}),
    ("f_reverse", "{{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }}", {}),
    ("f_replace", "{{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 1) }}", {}),
    ("f_indent", "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'x\\ny'|indent('> ') }}", {}),
    ("f_wordcount_center", "{{ 'hello big world'|wordcount }} [{{ 'ab'|center(6) }}]", {}),
    ("f_batch_slice", "{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }} {{ [1, 2, 3, 4, 5]|slice(2)|list }}", {}),
    ("f_truncate", "{{ 'hello world foo bar'|truncate(12) }}|{{ 'hello world foo bar'|truncate(12, true) }}|{{ 'short'|truncate(10) }}", {}),
    ("f_escape_format", "{{ '<a href=\"x\">&</a>'|e }} {{ '%s=%s'|format('k', 1) }}", {}),
    ("f_attr", "{{ d|attr('items') is callable }} [{{ d|attr('a') }}]", {"d": {"a": 1}}),
    ("f_tojson_basic", "{{ d|tojson }}", {"d": {"name": "fn", "args": {"x": 1, "y": [1.5, True, None]}, "s": "é\"\\\n\t\u0001"}}),
    ("f_tojson_indent", "{{ d|tojson(indent=2) }}|{{ [1, [2, {}], []]|tojson(indent=4) }}", {"d": {"a": 1, "b": {"c": [1, 2]}}}),
    ("f_tojson_options", "{{ d|tojson(sort_keys=true) }} {{ d|tojson(separators=(',', ':')) }} {{ 'é'|tojson(ensure_ascii=true) }} {{ '😀'|tojson(true) }}", {"d": {"b": 1, "a": 2}}),
    ("f_tojson_scalars", "{{ 1.0|tojson }} {{ 1e20|tojson }} {{ 0.1|tojson }} {{ none|tojson }} {{ 'x'|tojson }} {{ (1, 2)|tojson }} {{ {1: 'int key'}|tojson }}", {}),
    ("f_tojson_undefined_error", "{{ nothing|tojson }}", {}),
    ("generators", "{{ [1, 2]|map('string') is iterable }} {{ [1]|select is sequence }} {% if []|select %}T{% endif %} {{ ([]|map('upper')|list) == [] }} {{ nothing|map('upper')|list }} {{ {'a': 1}|items|list }}", {}),
    ("generator_len_error", "{{ [1, 2]|map('string')|length }}", {}),
    ("generator_last_error", "{{ [1, 2]|select|last }}", {}),
    ("generator_first_join_sort", "{{ [3, 1]|select|first }} {{ [3, 1]|select|join('-') }} {{ [3, 1]|select|sort }} {{ [3, 1, 3]|unique|list }} {{ [1, 2, 3]|batch(2)|list }} {{ [3, 1]|select|reverse|list }}", {}),
    ("slice_dict_error", "{{ d[:1] }}", {"d": {"a": 1}}),
    ("slice_none_error", "{{ x[1:] }}", {"x": None}),
    ("slice_int_error", "{{ n[:2] }}", {"n": 10}),
    ("slice_undefined_error", "{{ nothing[1:] }}", {}),
    ("int_float_undefined_error", "{{ nothing|int }}", {}),
    ("float_undefined_error", "{{ nothing.x|float }}", {"nothing": {}}),
    ("indent_non_string_error", "{{ 2.5|indent(2) }}", {}),
    ("truncate_non_string", "{{ (1, 2)|truncate(5) }} {{ [1, 2, 3]|truncate(3, leeway=0) }}", {}),
    ("f_chain", "{{ '  Hello  '|trim|lower|replace('l', 'L')|length }}", {}),
    # --- tests ---
    ("t_types", "{{ 'a' is string }} {{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ true is integer }} {{ true is boolean }} {{ {} is mapping }} {{ [] is sequence }} {{ [] is iterable }} {{ 'a' is sequence }} {{ none is none }} {{ 1 is none }}", {}),
    ("t_defined", "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ x is not none }} {{ z is none }}", {"x": 1, "z": None}),
    ("t_numbers", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 3 is gt 2 }} {{ 3 is lt(2) }} {{ 3 is ge 3 }} {{ 3 is le 2 }} {{ 3 is ne 2 }} {{ 3 is eq 3 }} {{ 3 is equalto 4 }} {{ 3 is sameas 3 }}", {}),
    ("t_misc", "{{ 'ab' is lower }} {{ 'AB' is upper }} {{ 2 is in [1, 2] }} {{ range is callable }} {{ true is true }} {{ 0 is false }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ none is sameas none }}", {}),
    ("t_not", "{{ 1 is not string }} {{ not 1 is string }} {{ x is not defined }}", {}),
    # --- for loops ---
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first|int }}{{ loop.last|int }}{{ loop.length }} {% endfor %}", {}),
    ("for_prev_next_cycle", "{% for x in [1, 2, 3] %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('a', 'b') }}]{% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}none{% endfor %}{% for x in [1] %}y{% else %}n{% endfor %}", {}),
    ("for_filter", "{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }}{{ ',' if not loop.last }}{% endfor %}", {"messages": MSGS}),
    ("for_filter_else", "{% for x in [1, 2] if x > 5 %}{{ x }}{% else %}nothing{% endfor %}", {}),
    ("for_unpack", "{% for a, b in [(1, 2), [3, 4]] %}{{ a + b }} {% endfor %}{% for k, v in {'x': 1}.items() %}{{ k }}{{ v }}{% endfor %}", {}),
    ("for_unpack_error", "{% for a, b in [(1, 2, 3)] %}{% endfor %}", {}),
    ("for_nested_loop", "{% for i in range(2) %}{% set outer = loop %}{% for j in range(2) %}{{ outer.index }}{{ loop.index }} {% endfor %}{% endfor %}", {}),
    ("for_break_continue", "{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("for_range", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }}", {}),
    ("for_range_too_big", "{{ range(1000000)|length }}", {}),
    ("for_over_dict", "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}", {}),
    ("for_over_none_error", "{% for x in none %}{% endfor %}", {}),
    ("for_scoping", "{% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = i %}{{ x }}|{% endfor %}{{ x }}", {}),
    ("for_scope_no_leak", "{% for i in range(2) %}{% set y = i %}{% endfor %}[{{ y }}][{{ i }}]", {}),
    ("for_if_scope_leaks", "{% if true %}{% set z = 5 %}{% endif %}{{ z }}", {}),
    ("for_loop_messages",
     "{% for message in messages %}{% if loop.first and message.role == 'system' %}<<SYS>>{{ message.content }}<</SYS>>{% elif message.role == 'user' %}[U{{ loop.index0 }}]{{ message.content }}{% else %}[A]{{ message.content }}{% endif %}{% endfor %}",
     {"messages": MSGS}),
    # --- set, namespace, with ---
    ("set_basic", "{% set a = 1 %}{% set b, c = 2, 3 %}{{ a }}{{ b }}{{ c }}{% set t = 1, 2 %}{{ t }}", {}),
    ("set_block", "{% set s %}x{{ 1 + 1 }}y{% endset %}[{{ s }}]{% set u | upper %}abc{% endset %}{{ u }}", {}),
    ("namespace", "{% set ns = namespace(found=false, n=0) %}{% for i in range(5) %}{% if i == 3 %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.found }} {{ ns.n }} {{ ns['n'] }}", {}),
    ("namespace_repr_and_new_attr", "{% set ns = namespace() %}{% set ns.x = [1] %}{{ ns.x }} {{ ns.y is defined }}", {}),
    ("set_attr_non_namespace_error", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("with_block", "{% set a = 1 %}{% with a = 2, b = 3 %}{{ a }}{{ b }}{% endwith %}{{ a }}[{{ b }}]", {}),
    ("dict_global", "{{ dict(a=1, b='x') }} {{ dict([('k', 1)]) }} {{ dict({'z': 0}, y=1) }}", {}),
    ("joiner", "{% set j = joiner(' | ') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %}", {}),
    # --- macros ---
    ("macro_basic", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}", {}),
    ("macro_default_refers_param", "{% macro f(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ f(3) }}", {}),
    ("macro_missing_arg", "{% macro f(a, b) %}[{{ a }}][{{ b }}]{% endmacro %}{{ f(1) }}", {}),
    ("macro_varargs_kwargs", "{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, k='v') }}", {}),
    ("macro_too_many_args", "{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}", {}),
    ("macro_unknown_kwarg", "{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, b=2) }}", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1)|int) }}{% endif %}{% endmacro %}{{ fact(6) }}", {}),
    ("macro_sees_later_globals", "{% set x = 5 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 6 %}{{ m() }}", {}),
    ("macro_whitespace",
     "{% macro render(m) %}\n    {% if m.content is string %}\n        {{ m.content }}\n    {% else %}\n        {% for p in m.content %}{{ p.text }}{% endfor %}\n    {% endif %}\n{% endmacro %}\n[{{ render(a) }}][{{ render(b) }}]",
     {"a": {"content": "str"}, "b": {"content": [{"type": "text", "text": "p1"}, {"type": "text", "text": "p2"}]}}),
    ("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner{% endcall %}", {}),
    ("call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each([1, 2]) %}<{{ item }}>{% endcall %}", {}),
    ("filter_block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}|{% filter trim|replace('a', 'b') %}  aa  {% endfilter %}", {}),
    ("generation_tag", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %};{% endfor %}", {"messages": MSGS}),
    # --- globals ---
    ("raise_exception", "{% if messages[0].role != 'user' %}{{ raise_exception('Conversation must start with user') }}{% endif %}ok", {"messages": MSGS}),
    ("raise_exception_not_taken", "{% if false %}{{ raise_exception('no') }}{% endif %}fine", {}),
    ("not_callable_error", "{{ 'abc'() }}", {}),
    ("call_undefined_error", "{{ nothing() }}", {}),
    ("strftime_shape", "{{ strftime_now('%Y')|length }}", {}),
    # --- syntax errors (jinja2 fails at parse time; so must we) ---
    ("err_unclosed_for", "{% for x in y %}abc", {}),
    ("err_unclosed_if", "{% if x %}abc{% else %}", {}),
    ("err_unknown_filter", "{{ x|nosuchfilter }}", {}),
    ("err_unknown_test", "{{ x is nosuchtest }}", {}),
    ("unknown_filter_in_untaken_if", "{% if false %}{{ x|nosuchfilter }}{% elif false %}{{ x is nosuchtest }}{% endif %}ok", {}),
    ("unknown_filter_in_untaken_condexpr", "{{ 'a' if true else x|nosuchfilter }}{{ y|nosuch2 if false }}", {}),
    ("unknown_filter_in_taken_if_error", "{% if true %}{{ x|nosuchfilter }}{% endif %}", {}),
    ("unknown_filter_in_loop_inside_if_error", "{% if false %}{% for a in b %}{{ a|nosuchfilter }}{% endfor %}{% endif %}", {}),
    ("unknown_filter_in_macro_inside_if_error", "{% if false %}{% macro m() %}{{ 1|nosuchfilter }}{% endmacro %}{% endif %}", {}),
    ("unknown_filter_in_set_inside_if", "{% if false %}{% set q = 1|nosuchfilter %}{% endif %}ok", {}),
    ("err_unknown_tag", "{% frobnicate %}", {}),
    ("err_bad_expr", "{{ 1 + }}", {}),
    ("err_unclosed_var", "{{ x ", {}),
    ("err_unclosed_string", "{{ 'abc }}", {}),
    ("err_unclosed_comment", "{# never closed", {}),
    ("err_stray_endfor", "{% endfor %}", {}),
    ("err_bad_char", "{{ x ! y }}", {}),
    ("err_break_outside_loop", "{% break %}", {}),
    ("err_mismatched_bracket", "{{ [1, 2) }}", {}),
    ("err_assign_const", "{% set true = 1 %}", {}),
    ("err_elif_after_else", "{% if a %}{% else %}{% elif b %}{% endif %}", {}),
    ("err_empty_expr", "{{ }}", {}),
]


# Random mixes of text and tags with every whitespace-control combination, rendered both with
# the Hugging Face options and with Jinja's defaults: the lexer's trim/lstrip rules.
def _whitespace_cases(count, seed):
    import random
    rng = random.Random(seed)
    texts = ["", " ", "  ", "\n", "\n\n", "  \n", "\n  ", "\t", "a", " a ", "a\n", "\n b", "x y\n  ",
             "\r\n", " \t\n"]

    def tag(kind, body):
        left = rng.choice(["", "-", "+"]) if kind != "{{" else rng.choice(["", "-"])
        right = rng.choice(["", "-", "+"]) if kind == "{%" else rng.choice(["", "-"])
        return kind + left + " " + body + " " + right + {"{%": "%}", "{{": "}}", "{#": "#}"}[kind]

    def text():
        return "".join(rng.choice(texts) for _ in range(rng.randint(0, 3)))

    def block(depth):
        out = []
        for _ in range(rng.randint(1, 4)):
            r = rng.random()
            out.append(text())
            if r < 0.3:
                out.append(tag("{{", rng.choice(["s", "xs|length", "'q'", "d.k"])))
            elif r < 0.4:
                out.append(tag("{#", rng.choice(["c", "multi\nline"])))
            elif r < 0.55 and depth < 3:
                out.append(tag("{%", "if " + rng.choice(["t", "f", "xs"])) + block(depth + 1) +
                           (tag("{%", "else") + block(depth + 1) if rng.random() < 0.5 else "") +
                           tag("{%", "endif"))
            elif r < 0.7 and depth < 3:
                out.append(tag("{%", "for x in " + rng.choice(["xs", "s", "[]"])) + block(depth + 1) +
                           (tag("{%", "else") + block(depth + 1) if rng.random() < 0.3 else "") +
                           tag("{%", "endfor"))
            elif r < 0.8:
                out.append(tag("{%", "set y = " + rng.choice(["1", "s", "xs[0]"])))
            elif r < 0.85 and depth < 3:
                out.append(tag("{%", "macro m(a)") + block(depth + 1) + tag("{%", "endmacro") +
                           tag("{{", "m(1)"))
            elif r < 0.9:
                out.append(tag("{%", "raw") + text() + "{{ x }}" + text() + tag("{%", "endraw"))
            out.append(text())
        return "".join(out)

    variables = {"xs": [1, 2, 3], "s": "ab", "d": {"k": "v"}, "t": True, "f": False}
    return [(f"ws_random_{i}", block(0), variables, i % 2 == 0) for i in range(count)]


CASES += _whitespace_cases(200, 2024)
CASES += [
    ("unhashable_in_dict_error", "{{ [1] in {'k': 1} }}", {}),
    ("float_floordiv_python", "{{ 1 // 0.1 }} {{ -1 // 0.1 }} {{ 1 % 0.1 }} {{ -7.5 // 2 }} {{ 7 % -3 }}", {}),
    ("percent_lenient_mapping", "{{ 'abc' % [1] }} {{ 'x' % nothing }} {{ '%s' % [1, 2] }}", {}),
    ("callable_undefined", "{{ nothing is callable }} {{ 'a'.upper is callable }}", {}),
    ("test_extra_arg_error", "{{ x is defined['a'] }}", {}),
]


# Random nestings of set / for / if / macro / with / set-block / namespace that print variables:
# Jinja's scoping (what each frame sees, what leaks, names bound from a frame's start).
def _scoping_cases(count, seed):
    import random
    rng = random.Random(seed)

    def val():
        return rng.choice(["1", "'s'", "a", "b", "c", "i", "ns.v", "xs|length", "(b or 0)",
                           "loop.index if loop is defined else -1", "m() if m is defined else 'nom'",
                           "varargs", "kwargs", "caller() if caller is defined else 'noc'"])

    def pr():
        return "[{{ " + rng.choice(["a", "b", "c", "i", "ns.v", "loop.index", "m is defined",
                                    "b is defined", "x", "y"]) + " }}]"

    def stmt(d):
        r = rng.random()
        if r < 0.25:
            return pr()
        if r < 0.45:
            tgt = rng.choice(["a", "b", "c", "ns.v", "i", "x", "x, y"])
            v = val() if tgt != "x, y" else val() + ", " + val()
            return "{% set " + tgt + " = " + v + " %}"
        if d > 2:
            return pr()
        if r < 0.6:
            return "{% for i in xs %}" + body(d + 1) + "{% endfor %}"
        if r < 0.7:
            return "{% for x, y in [(1, 2)] %}" + body(d + 1) + "{% endfor %}"
        if r < 0.8:
            return ("{% if " + rng.choice(["a", "b", "not b", "i"]) + " %}" + body(d + 1) +
                    "{% else %}" + body(d + 1) + "{% endif %}")
        if r < 0.88:
            return ("{% macro m(p=1) %}" + body(d + 1) + "{% endmacro %}" +
                    rng.choice(["", "{{ m() }}", "{{ m(2, 3) }}"]))
        if r < 0.94:
            return "{% with b = " + val() + " %}" + body(d + 1) + "{% endwith %}"
        return "{% set c %}" + body(d + 1) + "{% endset %}" + pr()

    def body(d):
        return "".join(stmt(d) for _ in range(rng.randint(1, 4)))

    variables = {"xs": [1, 2], "a": "A0"}
    return [(f"scope_random_{i}", "{% set ns = namespace(v=0) %}" + body(0) + pr() + pr(), variables)
            for i in range(count)]


CASES += _scoping_cases(150, 7)
CASES += [
    ("scope_later_root_set_hides_context", "{% for i in [1] %}[{{ a }}]{% endfor %}{% set a = 1 %}[{{ a }}]", {"a": "ctx"}),
    ("scope_root_load_first_sees_context", "[{{ a }}]{% for i in [1] %}[{{ a }}]{% endfor %}{% set a = 1 %}[{{ a }}]", {"a": "ctx"}),
    ("scope_branch_set_keeps_context", "{% for i in [1] %}[{{ a }}]{% endfor %}{% if false %}{% set a = 1 %}{% endif %}", {"a": "ctx"}),
    ("scope_macro_sees_root_binding", "{% macro m() %}[{{ a }}]{% endmacro %}{{ m() }}{% set a = 1 %}{{ m() }}", {"a": "ctx"}),
    ("scope_set_block_does_not_leak", "{% set c %}{% set b = 1 %}{% endset %}[{{ b }}]", {}),
]
