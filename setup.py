"""Packaging for mtp_lit, nbdev 2.x style: everything is read from settings.ini."""
from configparser import ConfigParser
import setuptools, shlex

config = ConfigParser(delimiters=['='])
config.read('settings.ini', encoding='utf-8')
cfg = config['DEFAULT']

cfg_keys = 'version description keywords author author_email'.split()
expected = cfg_keys + "lib_name user branch license status min_python audience language".split()
for o in expected: assert o in cfg, "missing expected setting: {}".format(o)
setup_cfg = {o: cfg[o] for o in cfg_keys}

licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
py_versions = '3.10 3.11 3.12 3.13'.split()

req = lambda k: shlex.split(cfg.get(k, '').strip())
requirements = req('requirements')
lic = licenses.get(cfg['license'].lower(), (cfg['license'], None))
min_python = cfg['min_python']
dev_requirements = req('dev_requirements')
extras = {'tools': req('tools_requirements'), 'vllm': req('vllm_requirements'), 'dev': dev_requirements}

setuptools.setup(
    name=cfg['lib_name'],
    license=lic[0],
    classifiers=['Development Status :: ' + statuses[int(cfg['status'])],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title()]
        + ['Programming Language :: Python :: ' + o for o in py_versions[py_versions.index(min_python):]]
        + (['License :: ' + lic[1]] if lic[1] else []),
    url=cfg['git_url'],
    packages=setuptools.find_packages(include=['mtp_lit', 'mtp_lit.*']),
    include_package_data=True,
    package_data={'mtp_lit': ['checkpoints/**/*', 'data/*']},
    install_requires=requirements,
    extras_require=extras,
    python_requires='>=' + cfg['min_python'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    zip_safe=False,
    entry_points={
        'console_scripts': cfg.get('console_scripts', '').split(),
        'nbdev': [f'{cfg.get("lib_path")}={cfg.get("lib_path")}._modidx:d'],
        # vLLM calls every `vllm.general_plugins` entry point once in each of its processes.
        'vllm.general_plugins': ['mtp_lit = mtp_lit.plugin:register'],
    },
    **setup_cfg)
